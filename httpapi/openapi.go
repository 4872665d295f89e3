package httpapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the OpenAPI document ships inside the binary
	"encoding/hex"
	"net/http"
	"time"
)

// openAPIJSON is the OpenAPI 3.1 document of every /v1 route. It is written by hand, not
// generated from handlers, so it states the contract; the tests in openapi_test.go hold the
// router and real responses to it.
//
//go:embed openapi.json
var openAPIJSON []byte

// openAPIETag lets clients revalidate the document cheaply; it changes with the binary.
var openAPIETag = func() string {
	sum := sha256.Sum256(openAPIJSON)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()

// OpenAPIDocument returns the OpenAPI 3.1 document served at GET /openapi.json.
func OpenAPIDocument() []byte { return bytes.Clone(openAPIJSON) }

// serveOpenAPI answers GET /openapi.json.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Access-Control-Allow-Origin", "*") // API explorers load it cross-origin
	w.Header().Set("ETag", openAPIETag)
	http.ServeContent(w, r, "openapi.json", time.Time{}, bytes.NewReader(openAPIJSON))
}
