// Package openapicheck holds a test, and nothing else: it checks the
// gateway's OpenAPI document (gateway.Gateway.OpenAPI) with an OpenAPI 3.1
// validator, libopenapi-validator, and checks the gateway's real responses,
// successes and each error status, against the document; and it generates a
// TypeScript client from the document with openapi-typescript, compiles it
// with tsc --strict and calls the gateway through openapi-fetch
// (TestTypedClient; the packages are ts/package-lock.json's). It is a
// module of its own so that the validator, a heavy test tool, stays out of
// rpcd's go.mod, as bench/ keeps the peers out.
//
//	cd gateway/openapicheck && (cd ts && npm ci) && go test ./...
package openapicheck
