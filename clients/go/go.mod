module github.com/agui-state/agui-state/clients/go

// 1.18: one generic helper (do, in methods.go). The standard library only: no require.
go 1.18
