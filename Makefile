# The habits in one place. `make test` is what CI runs (.ci/run).
.PHONY: test lint fuzz bench bench-peers serve

test:
	go test -race ./...

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Every fuzz target for a while; FUZZTIME=5m for longer. The targets that
# run a server or a client over loopback need a bounded minimization
# (-fuzzminimizetime 10x): minimizing by time there takes minutes per input.
FUZZTIME ?= 30s
fuzz:
	go test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./proto
	go test -run '^$$' -fuzz FuzzMatch -fuzztime $(FUZZTIME) ./proto
	go test -run '^$$' -fuzz FuzzTopicContainment -fuzztime $(FUZZTIME) ./auth
	go test -run '^$$' -fuzz FuzzExpand -fuzztime $(FUZZTIME) ./internal/compression
	go test -run '^$$' -fuzz FuzzReader -fuzztime $(FUZZTIME) ./record
	go test -run '^$$' -fuzz FuzzJSONString -fuzztime $(FUZZTIME) ./internal/jsoncodec
	go test -run '^$$' -fuzz FuzzJSONFloat -fuzztime $(FUZZTIME) ./internal/jsoncodec
	go test -run '^$$' -fuzz FuzzTypedArgs -fuzztime $(FUZZTIME) ./handler
	go test -run '^$$' -fuzz FuzzStreams -fuzztime $(FUZZTIME) ./internal/engine
	go test -run '^$$' -fuzz FuzzLiveServer -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./reactor
	go test -run '^$$' -fuzz FuzzClientFromServer -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./client

bench:
	go test -run '^$$' -bench . -benchmem ./...

# rpcd beside its peers and floors, every cell, medians of 3 runs (about 10 minutes).
bench-peers:
	cd bench && go run . -d 2s -runs 3 -json results.json

serve:
	go run ./cmd/rpcd serve
