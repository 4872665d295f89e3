// Package openapitest holds the service's HTTP routes and real responses to its OpenAPI 3.1
// document (httpapi/openapi.json): route diffs, response and event validation against the
// schemas, broken references. Test code only: the service serves the document, it does not
// validate against it.
package openapitest

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gorilla/mux"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// OpenAPI is a parsed OpenAPI 3.1 document, used to hold a router and real responses to the
// document. Response schemas are JSON Schema 2020-12 (the dialect of OpenAPI 3.1) and are
// checked with santhosh-tekuri/jsonschema, formats asserted.
type OpenAPI struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// openAPIURL names the document for the schema compiler; nothing is fetched from it.
const openAPIURL = "urn:switchyard:openapi.json"

// Parse parses an OpenAPI document (httpapi.OpenAPIDocument() for the service's own).
func Parse(data []byte) (*OpenAPI, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("openapi: parse: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("openapi: the document is not a JSON object")
	}
	if ver, _ := doc["openapi"].(string); !strings.HasPrefix(ver, "3.1.") {
		return nil, fmt.Errorf("openapi: version %q, want 3.1.x", ver)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return &OpenAPI{doc: doc, compiler: c, compiled: map[string]*jsonschema.Schema{}}, nil
}

// Operation is one documented method and path template.
type Operation struct {
	Method string // upper case
	Path   string // as in the document, e.g. /v1/sdk/components/executions/{executionId}
}

func (o Operation) String() string { return o.Method + " " + o.Path }

var operationMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Operations lists the documented operations, sorted by path then method.
func (o *OpenAPI) Operations() []Operation {
	paths, _ := o.doc["paths"].(map[string]any)
	var out []Operation
	for p, item := range paths {
		m, _ := item.(map[string]any)
		for _, method := range operationMethods {
			if _, ok := m[method]; ok {
				out = append(out, Operation{Method: strings.ToUpper(method), Path: p})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// RouteDiff compares a router with the document for every route whose path template starts
// with prefix (such as "/v1"). Undocumented lists routes the router serves that the document
// lacks; unserved lists documented operations under prefix that no route serves. Path
// parameter names do not matter (only their places); a route restricted to literal
// alternatives ({action:submit|secret}) stands for one path per alternative; HEAD is
// covered by GET; a route without a method restriction needs its path documented with at
// least one method.
func (o *OpenAPI) RouteDiff(r *mux.Router, prefix string) (undocumented, unserved []string, err error) {
	documented := map[string]bool{} // "METHOD shape" and "* shape"
	for _, op := range o.Operations() {
		if !strings.HasPrefix(op.Path, prefix) {
			continue
		}
		documented[op.Method+" "+shape(op.Path)] = true
		documented["* "+shape(op.Path)] = true
	}
	served := map[string]bool{}
	err = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		if route.GetHandler() == nil {
			return nil // the prefix route of a subrouter: its routes are walked on their own
		}
		tpl, err := route.GetPathTemplate()
		if err != nil || !strings.HasPrefix(tpl, prefix) {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			methods = []string{"*"}
		}
		for _, path := range expandTemplate(tpl) {
			for _, m := range methods {
				key := m + " " + shape(path)
				served[key] = true
				if m == http.MethodHead && documented["GET "+shape(path)] {
					continue
				}
				if !documented[key] {
					undocumented = append(undocumented, m+" "+path)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("openapi: walk the router: %w", err)
	}
	for _, op := range o.Operations() {
		s := shape(op.Path)
		if strings.HasPrefix(op.Path, prefix) && !served[op.Method+" "+s] && !served["* "+s] {
			unserved = append(unserved, op.String())
		}
	}
	sort.Strings(undocumented)
	return slices.Compact(undocumented), unserved, nil
}

var (
	templateVar = regexp.MustCompile(`\{[^{}]*\}`)
	literalAlts = regexp.MustCompile(`^[A-Za-z0-9_.~-]+(\|[A-Za-z0-9_.~-]+)*$`)
)

// shape replaces every path parameter with {} so templates compare by structure.
func shape(path string) string { return templateVar.ReplaceAllString(path, "{}") }

// expandTemplate turns a gorilla/mux template into OpenAPI paths: {name:a|b} becomes one path
// per literal alternative, any other {name:pattern} becomes {name}.
func expandTemplate(tpl string) []string {
	loc := templateVar.FindStringIndex(tpl)
	if loc == nil {
		return []string{tpl}
	}
	head, v, tail := tpl[:loc[0]], tpl[loc[0]+1:loc[1]-1], tpl[loc[1]:]
	name, pattern, hasPattern := strings.Cut(v, ":")
	var parts []string
	if hasPattern && literalAlts.MatchString(pattern) {
		parts = strings.Split(pattern, "|")
	} else {
		parts = []string{"{" + name + "}"}
	}
	var out []string
	for _, p := range parts {
		for _, rest := range expandTemplate(tail) {
			out = append(out, head+p+rest)
		}
	}
	return out
}

// ValidateResponse checks a real answer to method and path (a concrete request path such as
// /v1/sdk/components/executions/1234) against the document: the status must be documented
// for the operation, the content type must be one it lists, and a JSON body must satisfy its
// schema. A 204 or a response documented without content must have an empty body.
func (o *OpenAPI) ValidateResponse(method, path string, status int, header http.Header, body []byte) error {
	resp, ptr, err := o.response(method, path, status)
	if err != nil {
		return err
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(bytes.TrimSpace(body)) > 0 {
			return fmt.Errorf("openapi: %s %s %d: body %q where the document has none", method, path, status, clip(body))
		}
		return nil
	}
	ct, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("openapi: %s %s %d: Content-Type %q: %w", method, path, status, header.Get("Content-Type"), err)
	}
	if _, ok := content[ct]; !ok {
		return fmt.Errorf("openapi: %s %s %d: Content-Type %s is not documented (%s)", method, path, status, ct, strings.Join(keys(content), ", "))
	}
	if ct != "application/json" {
		return nil
	}
	return o.validate(ptr+"/content/"+escape(ct)+"/schema", body, fmt.Sprintf("%s %s %d", method, path, status))
}

// ValidateEvent checks one SSE data message of a streaming answer against the event schema
// the document gives for it (x-event-schema of the text/event-stream content).
func (o *OpenAPI) ValidateEvent(method, path string, status int, data []byte) error {
	resp, ptr, err := o.response(method, path, status)
	if err != nil {
		return err
	}
	content, _ := resp["content"].(map[string]any)
	sse, _ := content["text/event-stream"].(map[string]any)
	if _, ok := sse["x-event-schema"]; !ok {
		return fmt.Errorf("openapi: %s %s %d: no text/event-stream content with x-event-schema", method, path, status)
	}
	return o.validate(ptr+"/content/text~1event-stream/x-event-schema", data, fmt.Sprintf("%s %s %d event", method, path, status))
}

// response finds the response object for the status (exact, then 2XX-style, then default)
// and its JSON pointer, following a $ref to components/responses.
func (o *OpenAPI) response(method, path string, status int) (map[string]any, string, error) {
	tpl, err := o.match(path)
	if err != nil {
		return nil, "", err
	}
	paths := o.doc["paths"].(map[string]any)
	item := paths[tpl].(map[string]any)
	opv, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("openapi: %s %s is not documented", method, tpl)
	}
	responses, _ := opv["responses"].(map[string]any)
	ptr := "#/paths/" + escape(tpl) + "/" + strings.ToLower(method) + "/responses/"
	code := strconv.Itoa(status)
	var resp map[string]any
	for _, k := range []string{code, code[:1] + "XX", "default"} {
		if r, ok := responses[k].(map[string]any); ok {
			resp, ptr = r, ptr+k
			break
		}
	}
	if resp == nil {
		return nil, "", fmt.Errorf("openapi: %s %s: status %d is not documented (documented: %s)", method, tpl, status, strings.Join(keys(responses), ", "))
	}
	if ref, ok := resp["$ref"].(string); ok {
		target, err := o.pointer(ref)
		if err != nil {
			return nil, "", err
		}
		resp, _ = target.(map[string]any)
		ptr = ref
	}
	return resp, ptr, nil
}

// match finds the documented path template of a concrete path; a literal segment wins over
// a parameter, as OpenAPI prescribes.
func (o *OpenAPI) match(path string) (string, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	best, bestLiterals := "", -1
	paths, _ := o.doc["paths"].(map[string]any)
	for tpl := range paths {
		ts := strings.Split(strings.Trim(tpl, "/"), "/")
		if len(ts) != len(segs) {
			continue
		}
		literals := 0
		ok := true
		for i, t := range ts {
			switch {
			case templateVar.MatchString(t) && segs[i] != "":
			case t == segs[i]:
				literals++
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = tpl, literals
		}
	}
	if best == "" {
		return "", fmt.Errorf("openapi: no documented path matches %s", path)
	}
	return best, nil
}

func (o *OpenAPI) validate(ptr string, body []byte, what string) error {
	o.mu.Lock()
	sch, ok := o.compiled[ptr]
	if !ok {
		var err error
		if sch, err = o.compiler.Compile(openAPIURL + ptr); err != nil {
			o.mu.Unlock()
			return fmt.Errorf("openapi: compile the schema at %s: %w", ptr, err)
		}
		o.compiled[ptr] = sch
	}
	o.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("openapi: %s: the body is not JSON: %w: %q", what, err, clip(body))
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("openapi: %s: the body does not match the documented schema: %w\nbody: %s", what, err, clip(body))
	}
	return nil
}

// CompileSchemas compiles every schema under components/schemas, so a malformed one fails
// a test before any response needs it.
func (o *OpenAPI) CompileSchemas() error {
	comps, _ := o.doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	var errs []error
	for _, name := range keys(schemas) {
		if _, err := o.compiler.Compile(openAPIURL + "#/components/schemas/" + escape(name)); err != nil {
			errs = append(errs, fmt.Errorf("schema %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// pointer resolves a local reference (#/a/b) in the document.
func (o *OpenAPI) pointer(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("openapi: only local references are used, not %q", ref)
	}
	var cur any = o.doc
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("openapi: %s does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("openapi: %s does not resolve", ref)
		}
	}
	return cur, nil
}

// Refs lists every $ref in the document that does not resolve.
func (o *OpenAPI) Refs() (broken []string) {
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			if ref, ok := t["$ref"].(string); ok {
				if _, err := o.pointer(ref); err != nil {
					broken = append(broken, ref)
				}
			}
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(o.doc)
	sort.Strings(broken)
	return slices.Compact(broken)
}

// Raw returns the parsed document (numbers as json.Number), for structural checks.
func (o *OpenAPI) Raw() map[string]any { return o.doc }

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}
