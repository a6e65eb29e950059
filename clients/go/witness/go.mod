// Test-only module: the client's scenarios replayed with evanphx/json-patch.
// A module of its own so that the client module requires nothing. Every
// dependency is a replace to a local directory, which needs no download and
// no go.sum: it builds offline (GOFLAGS=-mod=mod GOPROXY=off).
module github.com/agui-state/agui-state/clients/go/witness

go 1.18

require (
	github.com/agui-state/agui-state/clients/go v0.0.0
	// Debian's golang-github-evanphx-json-patch-dev 5.2.0. Its root package
	// (module path without /v5) is the one imported; a replaced module's version
	// is only a name, and v5.x cannot be written for a path without /v5.
	github.com/evanphx/json-patch v0.0.0
)

require github.com/pkg/errors v0.9.1 // indirect; imported by json-patch

replace github.com/agui-state/agui-state/clients/go => ../

replace github.com/evanphx/json-patch => /usr/share/gocode/src/github.com/evanphx/json-patch

// Debian ships pkg/errors without a go.mod, which a replaced directory needs:
// a copy of its source with one added (third_party/pkg-errors/README.md).
replace github.com/pkg/errors => ./third_party/pkg-errors

// json-patch's go.mod requires go-flags for its command, which Debian does not
// ship and nothing here imports. Since Go 1.16 a requirement on an excluded
// version is ignored, so no command (go list -m all, go mod tidy) looks it up.
exclude github.com/jessevdk/go-flags v1.4.0
