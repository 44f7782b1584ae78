# The habits in one place. `make test` is what CI runs (.ci/run).
.PHONY: test lint fuzz bench serve

test:
	go test -race ./...

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Each parser for a while; FUZZTIME=5m for longer.
FUZZTIME ?= 30s
fuzz:
	go test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./proto

bench:
	go test -run '^$$' -bench . -benchmem ./...

serve:
	go run ./cmd/rpcd serve
