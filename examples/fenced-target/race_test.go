package fencedtarget

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// serve starts h on 127.0.0.1 for the test.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// holdWrites is a transport that stops the first write (PUT) it carries until release is closed,
// after telling held: the writer has read the target and is about to write.
type holdWrites struct {
	held, release chan struct{}
	once          sync.Once
}

func newHoldWrites() *holdWrites {
	return &holdWrites{held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.held)
			<-h.release
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// writer is one deploy writing its release with its token, through client.
type writer func(ctx context.Context, client *http.Client, release string, token int64) error

// lostRace is the interleaving fencing exists for: the older deploy (token 5) reads the target, a
// newer deploy (token 7) reads and writes, then the older one writes. The older one must be refused,
// and the target must keep the newer release. It returns what went wrong.
func lostRace(t *testing.T, write writer, live func() (string, int64)) []string {
	t.Helper()
	ctx := context.Background()
	if err := write(ctx, http.DefaultClient, "r1", 1); err != nil {
		t.Fatalf("the first deploy: %v", err)
	}
	hold := newHoldWrites()
	older := make(chan error, 1)
	go func() { older <- write(ctx, &http.Client{Transport: hold}, "r5", 5) }()
	select {
	case <-hold.held:
	case err := <-older:
		t.Fatalf("the older deploy ended before writing: %v", err)
	}
	if err := write(ctx, http.DefaultClient, "r7", 7); err != nil {
		t.Fatalf("the newer deploy: %v", err)
	}
	close(hold.release)
	var problems []string
	if err := <-older; !errors.Is(err, ErrStale) {
		problems = append(problems, "the older deploy was not refused: "+errString(err))
	}
	if release, token := live(); release != "r7" || token != 7 {
		problems = append(problems, "the target went back to an older release: "+release)
	}
	return problems
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// manyWriters races n deploys with tokens 1..n, each with its own client as separate processes
// would be, and returns the tokens in the order the target accepted them.
func manyWriters(t *testing.T, n int, write writer) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func(token int64) {
			defer wg.Done()
			<-start
			err := write(context.Background(), &http.Client{Transport: &http.Transport{}}, "r", token)
			if err != nil && !errors.Is(err, ErrStale) {
				t.Errorf("deploy %d: %v", token, err)
			}
		}(int64(i))
	}
	close(start)
	wg.Wait()
}

// nonDecreasing reports whether accepted tokens never went down.
func nonDecreasing(tokens []int64) bool {
	for i := 1; i < len(tokens); i++ {
		if tokens[i] < tokens[i-1] {
			return false
		}
	}
	return true
}
