package fencedtarget

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

const deploymentPath = "/apis/apps/v1/namespaces/prod/deployments/api"

// apiserver is an in-process Kubernetes API server holding one Deployment, with the apiserver's
// optimistic concurrency: an update whose metadata.resourceVersion is not the current one gets 409
// Conflict; one without a resourceVersion is unconditional, as on a real apiserver.
type apiserver struct {
	mu       sync.Mutex
	obj      map[string]any
	version  int
	accepted []int64
}

func newAPIServer() *apiserver {
	return &apiserver{version: 1, obj: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "api", "namespace": "prod"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "api", "image": "api:old"}}}}},
	}}
}

func (s *apiserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != deploymentPath || r.Header.Get("Authorization") != "Bearer t0k" {
		http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.obj["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(s.version)
		_ = json.NewEncoder(w).Encode(s.obj)
	case http.MethodPut:
		var obj map[string]any
		if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		meta := obj["metadata"].(map[string]any)
		if rv, ok := meta["resourceVersion"]; ok && rv != strconv.Itoa(s.version) {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","status":"Failure","reason":"Conflict","code":409}`))
			return
		}
		s.version++
		meta["resourceVersion"] = strconv.Itoa(s.version)
		s.obj = obj
		ann, _ := meta["annotations"].(map[string]any)
		tok, _ := strconv.ParseInt(ann[AnnotationToken].(string), 10, 64)
		s.accepted = append(s.accepted, tok)
		_ = json.NewEncoder(w).Encode(obj)
	}
}

func (s *apiserver) live() (string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ann, _ := s.obj["metadata"].(map[string]any)["annotations"].(map[string]any)
	tok, _ := strconv.ParseInt(ann[AnnotationToken].(string), 10, 64)
	release, _ := ann[AnnotationRelease].(string)
	return release, tok
}

func rollout(apiURL string) writer {
	return func(ctx context.Context, client *http.Client, release string, token int64) error {
		k := &Kubernetes{Client: client, APIServer: apiURL, Token: "t0k", Namespace: "prod", Name: "api", Attempts: 1000}
		return k.Rollout(ctx, release, "api:"+release, token)
	}
}

func TestKubernetesRefusesStaleWriters(t *testing.T) {
	t.Parallel()
	api := newAPIServer()
	write := rollout(serve(t, api))
	ctx := context.Background()
	if err := write(ctx, http.DefaultClient, "r4", 4); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, http.DefaultClient, "r2", 2); err == nil {
		t.Error("an older token was accepted")
	}
	if err := write(ctx, http.DefaultClient, "r4", 4); err != nil {
		t.Errorf("the same grant retrying its write: %v", err)
	}
	release, token := api.live()
	image := api.obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
	if release != "r4" || token != 4 || image != "api:r4" {
		t.Errorf("live %s token %d image %v, want r4, 4, api:r4", release, token, image)
	}
}

func TestKubernetesLostRace(t *testing.T) {
	t.Parallel()
	api := newAPIServer()
	for _, p := range lostRace(t, rollout(serve(t, api)), api.live) {
		t.Error(p)
	}
}

func TestKubernetesManyWriters(t *testing.T) {
	t.Parallel()
	api := newAPIServer()
	manyWriters(t, 16, rollout(serve(t, api)))
	if _, token := api.live(); token != 16 || !nonDecreasing(api.accepted) {
		t.Errorf("live token %d, accepted %v: want 16 live and tokens that never went down", token, api.accepted)
	}
}

// unconditionalRollout drops the resourceVersion before the update, which makes it unconditional:
// the bug that reading the token first does not fix. The lost-race scenario must catch it.
func unconditionalRollout(apiURL string) writer {
	return func(ctx context.Context, client *http.Client, release string, token int64) error {
		k := &Kubernetes{Client: client, APIServer: apiURL, Token: "t0k", Namespace: "prod", Name: "api"}
		obj, err := k.do(ctx, http.MethodGet, nil)
		if err != nil {
			return err
		}
		meta := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		if held, err := strconv.ParseInt(fmt.Sprint(ann[AnnotationToken]), 10, 64); err == nil && held > token {
			return &StaleError{Held: held, Mine: token}
		}
		ann[AnnotationToken], ann[AnnotationRelease] = strconv.FormatInt(token, 10), release
		meta["annotations"] = ann
		delete(meta, "resourceVersion")
		_, err = k.do(ctx, http.MethodPut, obj)
		return err
	}
}

func TestKubernetesRaceCatchesUnconditionalUpdates(t *testing.T) {
	t.Parallel()
	api := newAPIServer()
	if len(lostRace(t, unconditionalRollout(serve(t, api)), api.live)) == 0 {
		t.Error("the lost-race scenario accepts an update without its resourceVersion")
	}
}
