package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/githubapp"
)

const full = `{
 "openapi": "3.0.3", "info": {"title": "GitHub", "version": "1"}, "tags": [{"name": "issues"}],
 "servers": [{"url": "https://api.github.com"}], "x-webhooks": {"push": {}},
 "paths": {
  "/a/{id}": {
   "get": {"parameters": [{"$ref": "#/components/parameters/id"}],
    "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/a"}}}}}},
   "delete": {"responses": {"204": {"description": "gone"}}}
  },
  "/b": {"get": {"responses": {"200": {"$ref": "#/components/responses/b"}}}}
 },
 "components": {
  "parameters": {"id": {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}},
  "schemas": {
   "a": {"type": "object", "properties": {"owner": {"$ref": "#/components/schemas/user"}}},
   "user": {"type": "object", "properties": {"self": {"$ref": "#/components/schemas/user"}}},
   "unused": {"type": "string"}
  },
  "responses": {"b": {"description": "b"}}
 }
}`

func TestTrimKeepsOperationsAndWhatTheyReference(t *testing.T) {
	out, err := trim([]byte(full), []githubapp.Endpoint{{Method: "GET", Path: "/a/{id}"}}, "test 1.0")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"paths": doc["paths"].(map[string]any)["/a/{id}"].(map[string]any)["delete"], "components": keysOf(doc["components"])}
	want := map[string]any{"paths": nil, "components": map[string][]string{"parameters": {"id"}, "schemas": {"a", "user"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed (-want +got):\n%s", diff)
	}
	for _, dropped := range []string{"tags", "x-webhooks"} {
		if _, ok := doc[dropped]; ok {
			t.Errorf("%s kept", dropped)
		}
	}
	again, err := trim([]byte(full), []githubapp.Endpoint{{Method: "GET", Path: "/a/{id}"}}, "test 1.0")
	if err != nil || string(again) != string(out) {
		t.Errorf("a second run differs (err %v)", err)
	}
}

func TestTrimRejectsUnknownEndpoints(t *testing.T) {
	for _, e := range []githubapp.Endpoint{{Method: "GET", Path: "/c"}, {Method: "POST", Path: "/b"}} {
		_, err := trim([]byte(full), []githubapp.Endpoint{e}, "")
		if err == nil || !strings.Contains(err.Error(), "fix githubapp.Endpoints") {
			t.Errorf("%s %s: error = %v, want it to name the table to fix", e.Method, e.Path, err)
		}
	}
}

func keysOf(v any) map[string][]string {
	out := map[string][]string{}
	for kind, all := range v.(map[string]any) {
		for name := range all.(map[string]any) {
			out[kind] = append(out[kind], name)
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}
