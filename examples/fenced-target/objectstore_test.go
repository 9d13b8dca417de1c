package fencedtarget

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// objectStore is an in-process object store with the conditional writes of S3: an ETag per version,
// PUT with If-Match or If-None-Match: *, 412 when the condition fails. It records every accepted write.
type objectStore struct {
	mu       sync.Mutex
	body     []byte
	version  int
	accepted []int64
}

func (s *objectStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	etag := `"v` + strconv.Itoa(s.version) + `"`
	switch r.Method {
	case http.MethodGet:
		if s.body == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", etag)
		_, _ = w.Write(s.body)
	case http.MethodPut:
		match, noneMatch := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
		switch {
		case match != "" && (s.body == nil || match != etag),
			noneMatch == "*" && s.body != nil:
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var p Pointer
		if err := json.Unmarshal(b, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.body, s.version = b, s.version+1
		s.accepted = append(s.accepted, p.Token)
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *objectStore) live() (string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p Pointer
	_ = json.Unmarshal(s.body, &p)
	return p.Release, p.Token
}

func publisher(url string) writer {
	return func(ctx context.Context, client *http.Client, release string, token int64) error {
		s := &ObjectStore{Client: client, URL: url, Attempts: 1000}
		return s.Publish(ctx, Pointer{Release: release, Token: token})
	}
}

func TestObjectStoreRefusesStaleWriters(t *testing.T) {
	t.Parallel()
	store := &objectStore{}
	write := publisher(serve(t, store) + "/releases/api.json")
	ctx := context.Background()
	for _, step := range []struct {
		release string
		token   int64
		stale   bool
	}{{"r5", 5, false}, {"r3", 3, true}, {"r5", 5, false}, {"r9", 9, false}, {"r8", 8, true}} {
		err := write(ctx, http.DefaultClient, step.release, step.token)
		var se *StaleError
		if step.stale != errors.As(err, &se) || (!step.stale && err != nil) {
			t.Errorf("token %d: %v", step.token, err)
		}
		if step.stale && (se.Held != 9 && se.Held != 5) {
			t.Errorf("token %d: the error names token %d", step.token, se.Held)
		}
	}
	if release, token := store.live(); release != "r9" || token != 9 {
		t.Errorf("live %s (token %d), want r9 (9)", release, token)
	}
}

func TestObjectStoreLostRace(t *testing.T) {
	t.Parallel()
	store := &objectStore{}
	for _, p := range lostRace(t, publisher(serve(t, store)+"/releases/api.json"), store.live) {
		t.Error(p)
	}
}

func TestObjectStoreManyWriters(t *testing.T) {
	t.Parallel()
	store := &objectStore{}
	manyWriters(t, 16, publisher(serve(t, store)+"/releases/api.json"))
	if _, token := store.live(); token != 16 || !nonDecreasing(store.accepted) {
		t.Errorf("live token %d, accepted %v: want 16 live and tokens that never went down", token, store.accepted)
	}
}

// naivePublish reads, compares and writes without a condition: the bug the conditional write
// prevents. TestObjectStoreLostRace's scenario must catch it.
func naivePublish(url string) writer {
	return func(ctx context.Context, client *http.Client, release string, token int64) error {
		s := &ObjectStore{Client: client, URL: url}
		cur, _, err := s.get(ctx)
		if err != nil {
			return err
		}
		if cur != nil && cur.Token > token {
			return &StaleError{Held: cur.Token, Mine: token}
		}
		body, _ := json.Marshal(Pointer{Release: release, Token: token})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
}

func TestObjectStoreRaceCatchesUnconditionalWrites(t *testing.T) {
	t.Parallel()
	store := &objectStore{}
	if len(lostRace(t, naivePublish(serve(t, store)+"/releases/api.json"), store.live)) == 0 {
		t.Error("the lost-race scenario accepts a writer without a conditional write")
	}
}
