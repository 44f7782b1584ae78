# The habits in one place. `make test` is what CI runs (.ci/run).
.PHONY: test lint fuzz bench bench-peers serve

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
	go test -run '^$$' -fuzz FuzzJSONString -fuzztime $(FUZZTIME) ./handler
	go test -run '^$$' -fuzz FuzzJSONFloat -fuzztime $(FUZZTIME) ./handler

bench:
	go test -run '^$$' -bench . -benchmem ./...

# rpcd beside its peers and floors, every cell, medians of 3 runs (about 10 minutes).
bench-peers:
	cd bench && go run . -d 2s -runs 3 -json results.json

serve:
	go run ./cmd/rpcd serve
