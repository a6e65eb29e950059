// Debian's golang-github-pkg-errors-dev 0.9.1 ships no go.mod, and a replaced
// directory must have one: this is the only file added to its source.
module github.com/pkg/errors

go 1.13
