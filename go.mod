module github.com/pinpool/pinpool

go 1.26.0

require (
	github.com/alecthomas/kong v1.17.0
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
)
