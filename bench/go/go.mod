// bench/go: B18's program, the Go client beside a bare bufio client (bench/clients.ts builds and runs it).
// Its one dependency is a replace to the client's directory: it builds offline, with no go.sum.
module github.com/agui-state/agui-state/bench/go

go 1.18

require github.com/agui-state/agui-state/clients/go v0.0.0

replace github.com/agui-state/agui-state/clients/go => ../../clients/go
