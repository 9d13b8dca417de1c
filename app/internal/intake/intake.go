package intake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
)

// DefaultMaxBodyBytes caps a webhook body at GitHub's own cap on a payload, 25 MB (GitHub does not
// deliver a larger one); see the bounds below for what bodies in flight may take.
const DefaultMaxBodyBytes = 25 << 20

// Bounds of the webhook intake. Anybody can post to /webhook, and a body cannot be known to be
// GitHub's before all of it has been hashed, so what unsigned bodies can cost is bounded here:
//   - a body is at most the App's MaxBodyBytes (DefaultMaxBodyBytes, GitHub's own cap on a
//     payload); a larger declared Content-Length is refused (413) before anything is read;
//   - at most MaxDeliveriesInFlight deliveries are read, verified or handled at once;
//   - the bodies they keep in memory total at most twice MaxBodyBytes (InFlightBytes);
//   - the body of an event the App does not use is only hashed, never kept.
//
// A delivery beyond either bound is answered 503 with Retry-After before its body is read.
const (
	// MaxDeliveriesInFlight caps the webhook deliveries read, verified or handled at once.
	MaxDeliveriesInFlight = 64
	// BusyRetryAfter is the Retry-After of a delivery refused while the intake is full. GitHub does
	// not re-deliver by itself: a refused delivery is re-delivered from the App's settings
	// (Advanced, Recent Deliveries) or its API.
	BusyRetryAfter = 5 * time.Second
)

// InFlightBytes is the memory the webhook bodies being read, verified or handled may take at once,
// for a cap of maxBody on one body: room for two bodies of the largest size, and for many of the
// usual few kilobytes.
func InFlightBytes(maxBody int64) int64 { return 2 * maxBody }

// errBusy: the intake is full (503 with Retry-After).
var errBusy = errors.New("too many webhook deliveries in flight")

// mutantReadAll rebuilds the old intake so that the serve memory test can show it catches it: each
// body read whole before its signature is checked, and nothing capping the bodies in flight. Only
// a binary built with the latestwins_mutants tag can be told to (mutant_on.go); a release cannot.
const mutantReadAll = "readall"

// intake holds the bounds of the webhook deliveries in flight. Bodies are kept in pages of
// pageSize bytes, which go back to a pool when their delivery is done: a flood of unsigned bodies
// reuses the same pages instead of making garbage, so the memory its bodies take is the budget, not
// the budget and what the garbage collector has yet to reclaim. The pool lets the collector take
// the pages back once the flood is over.
type limiter struct {
	maxBody     int64
	maxInFlight int
	maxPages    int
	pages       sync.Pool // of *page
	mu          sync.Mutex
	inFlight    int
	reserved    int // pages reserved by the deliveries in flight
}

// pageSize is the unit bodies are kept in: the largest of Go's small allocation classes.
const PageSize = 32 << 10

type page [PageSize]byte

func newLimiter(maxBody int64, deliveries int, bytes int64) *limiter {
	in := &limiter{maxBody: maxBody, maxInFlight: deliveries, maxPages: int(max(bytes/PageSize, 1))}
	in.pages.New = func() any { return new(page) }
	return in
}

// pagesFor is the number of pages n bytes take.
func pagesFor(n int64) int { return int((n + PageSize - 1) / PageSize) }

// ticket is one delivery's share of the intake.
type ticket struct {
	in       *limiter
	reserved int     // pages
	pages    []*page // taken, within reserved
}

// enter takes a slot for a delivery, or answers errBusy at once.
func (in *limiter) enter() (*ticket, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.inFlight >= in.maxInFlight {
		return nil, errBusy
	}
	in.inFlight++
	return &ticket{in: in}, nil
}

// reserve adds n pages to the ticket's share, or answers errBusy when they would overrun the budget.
func (t *ticket) reserve(n int) error {
	t.in.mu.Lock()
	defer t.in.mu.Unlock()
	if t.in.reserved+n > t.in.maxPages {
		return errBusy
	}
	t.in.reserved += n
	t.reserved += n
	return nil
}

// page takes one page of those reserved.
func (t *ticket) page() []byte {
	p := t.in.pages.Get().(*page)
	t.pages = append(t.pages, p)
	return p[:]
}

// done gives the slot, the reservation and the pages back; nothing read must be used after it.
func (t *ticket) done() {
	if t == nil {
		return
	}
	for _, p := range t.pages {
		t.in.pages.Put(p)
	}
	t.in.mu.Lock()
	defer t.in.mu.Unlock()
	t.in.reserved -= t.reserved
	t.in.inFlight--
	t.reserved, t.pages = 0, nil
}

// readDelivery verifies a delivery while its body streams in, then parses it. The signature header
// is checked before anything is read; the body is hashed as it arrives and kept (within the
// intake's budget) only for an event the App uses. The ticket, when not nil, holds the delivery's
// share of the intake until done.
func (a *Webhook) readDelivery(w http.ResponseWriter, r *http.Request) (core.Delivery, *ticket, error) {
	if mutant == mutantReadAll {
		return a.readDeliveryWhole(w, r)
	}
	want, err := signatureOf(a.secret, r.Header)
	if err != nil {
		return core.Delivery{}, nil, err
	}
	if r.ContentLength > a.maxBody {
		return core.Delivery{}, nil, &http.MaxBytesError{Limit: a.maxBody}
	}
	t, err := a.limits.enter()
	if err != nil {
		return core.Delivery{}, nil, err
	}
	mac := hmac.New(sha256.New, a.secret)
	body := http.MaxBytesReader(w, r.Body, a.maxBody)
	used := UsedEvents[r.Header.Get(github.EventTypeHeader)]
	var kept [][]byte
	if used {
		kept, err = t.readBody(body, r.ContentLength, mac)
	} else {
		err = t.hashBody(body, mac)
	}
	if err != nil {
		return core.Delivery{}, t, err
	}
	if err := checkSignature(mac, want); err != nil {
		return core.Delivery{}, t, err
	}
	var payload []byte
	if used {
		payload = bytes.Join(kept, nil) // signed: GitHub's, worth a copy in one piece to parse
	}
	d, err := parseSigned(r.Header, payload)
	return d, t, err
}

// readDeliveryWhole is the old intake, rebuilt for the mutant "readall".
func (a *Webhook) readDeliveryWhole(w http.ResponseWriter, r *http.Request) (core.Delivery, *ticket, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		return core.Delivery{}, nil, err
	}
	d, err := ParseDelivery(a.secret, r.Header, body)
	return d, nil, err
}

// errLongerThanDeclared: the body goes on past its Content-Length.
var errLongerThanDeclared = &core.MalformedError{Reason: "the body is longer than its Content-Length"}

// hashBody writes a body into mac through one page, keeping nothing.
func (t *ticket) hashBody(body io.Reader, mac hash.Hash) error {
	if err := t.reserve(1); err != nil {
		return err
	}
	_, err := io.CopyBuffer(mac, body, t.page())
	return err
}

// readBody reads a body into pages the ticket reserves, writing it into mac as it arrives, and
// returns the pages, each cut to what it holds. A body of known length (declared >= 0) is reserved
// whole before the first byte is read; one of unknown length page by page. It answers errBusy when
// the budget runs out, and an *http.MaxBytesError when body (an http.MaxBytesReader) passes its cap.
func (t *ticket) readBody(body io.Reader, declared int64, mac hash.Hash) ([][]byte, error) {
	limit := t.in.maxBody
	if declared >= 0 {
		limit = declared
		if err := t.reserve(pagesFor(declared)); err != nil {
			return nil, err
		}
	}
	var pages [][]byte
	var total int64
	for {
		if total >= limit {
			return pages, probeEnd(body, declared, limit)
		}
		if n := len(pages); n == 0 || len(pages[n-1]) == cap(pages[n-1]) {
			if declared < 0 {
				if err := t.reserve(1); err != nil {
					return nil, err
				}
			}
			pages = append(pages, t.page()[:0])
		}
		cur := pages[len(pages)-1]
		n, err := body.Read(cur[len(cur):min(cap(cur), len(cur)+int(limit-total))])
		mac.Write(cur[len(cur) : len(cur)+n])
		pages[len(pages)-1] = cur[:len(cur)+n]
		total += int64(n)
		if errors.Is(err, io.EOF) {
			if declared >= 0 && total < declared {
				return nil, fmt.Errorf("the body ended after %d of its %d bytes: %w", total, declared, io.ErrUnexpectedEOF)
			}
			return pages, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// probeEnd checks that a body of limit bytes so far has no more.
func probeEnd(body io.Reader, declared, limit int64) error {
	var one [1]byte
	n, err := io.ReadAtLeast(body, one[:], 1)
	switch {
	case n > 0 && declared >= 0:
		return errLongerThanDeclared
	case n > 0:
		return &http.MaxBytesError{Limit: limit}
	case errors.Is(err, io.EOF):
		return nil
	}
	return err
}
