// Package faultproxy is an HTTP proxy for tests that loses requests and responses on purpose, between a
// client and a real server on loopback. Losing a response after the server committed the request is
// the fault that makes a write ambiguous: the client sees a reset connection, retries, and may find
// its own write already there.
package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
)

// Faults says which requests to disturb and how often. Probabilities are in [0, 1].
type Faults struct {
	// Match selects the requests that may be disturbed (nil: all).
	Match func(r *http.Request, body []byte) bool
	// LoseResponse forwards the request, lets the server commit it, then resets the client's
	// connection instead of answering.
	LoseResponse float64
	// LoseRequest resets the client's connection without forwarding the request.
	LoseRequest float64
}

// Counts tallies what the proxy did.
type Counts struct {
	Forwarded, LostResponses, LostRequests int64
}

// Proxy forwards to one upstream URL.
type Proxy struct {
	URL      string
	upstream string
	srv      *httptest.Server
	client   *http.Client

	mu     sync.Mutex
	rng    *rand.Rand
	faults Faults

	forwarded, lostResponses, lostRequests atomic.Int64
}

// Start listens on 127.0.0.1 and forwards to upstream (e.g. http://127.0.0.1:4567). seed makes the
// choice of disturbed requests repeatable for one interleaving.
func Start(upstream string, seed uint64) *Proxy {
	p := &Proxy{upstream: upstream, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	return p
}

// Close stops the proxy.
func (p *Proxy) Close() { p.srv.Close() }

// Set replaces the faults in force.
func (p *Proxy) Set(f Faults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
}

// Counts returns what the proxy did so far.
func (p *Proxy) Counts() Counts {
	return Counts{Forwarded: p.forwarded.Load(), LostResponses: p.lostResponses.Load(), LostRequests: p.lostRequests.Load()}
}

type fate int

const (
	deliver fate = iota
	loseRequest
	loseResponse
)

func (p *Proxy) decide(r *http.Request, body []byte) fate {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faults
	if f.Match != nil && !f.Match(r, body) {
		return deliver
	}
	x := p.rng.Float64()
	switch {
	case x < f.LoseRequest:
		return loseRequest
	case x < f.LoseRequest+f.LoseResponse:
		return loseResponse
	}
	return deliver
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	f := p.decide(r, body)
	if f == loseRequest {
		p.lostRequests.Add(1)
		reset(w)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("upstream: %v", err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, fmt.Sprintf("upstream body: %v", err), http.StatusBadGateway)
		return
	}
	p.forwarded.Add(1)
	if f == loseResponse {
		p.lostResponses.Add(1)
		reset(w)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

// reset closes the client's connection abruptly (RST), as a network fault would.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}
