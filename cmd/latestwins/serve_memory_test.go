package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// The flood: floodRounds rounds of floodSenders connections at once, each posting an unsigned body
// of floodBodyBytes (a push with a signature of zeros, so that each must be hashed whole to be
// found wrong), half of them with a Content-Length and half chunked. Every body of a round is in
// flight at the same time.
const (
	floodSenders   = 64
	floodRounds    = 2
	floodBodyBytes = 10 << 20
	// floodRSSBound is a generous safety bound on serve's peak resident memory under the flood, not
	// its budget: the intake keeps it near 100 MB; the old intake, which read every body whole
	// before checking its signature, reached 721-864 MB.
	floodRSSBound = 400 << 20
	// healthzEvery is how often /healthz is asked during the flood.
	healthzEvery = 50 * time.Millisecond
)

const floodSecret = "serve-memory-secret"

const floodConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

// floodReport is what a flood of unsigned bodies did to a `latestwins serve` process.
type floodReport struct {
	baseRSS, peakRSS int64           // VmRSS when ready, VmHWM after the flood (bytes)
	statuses         map[int]int     // answers to the flood's bodies
	failed           []string        // bodies that got no answer
	healthz          int             // /healthz polls during the flood
	healthzBad       []string        // polls not answered 200
	healthzSlowest   time.Duration   // the slowest poll
	took             time.Duration   // the flood's duration
	stderr           *syncbuf.Buffer // what serve said
}

// problems lists what the flood broke: bodies not refused with 401, 413 or 503 (or none hashed
// whole and refused 401), /healthz not answering, or a peak memory over floodRSSBound.
func (r *floodReport) problems() []string {
	var out []string
	answered := 0
	for code, n := range r.statuses {
		answered += n
		if code != http.StatusUnauthorized && code != http.StatusRequestEntityTooLarge && code != http.StatusServiceUnavailable {
			out = append(out, fmt.Sprintf("%d unsigned bodies answered %d, want 401, 413 or 503", n, code))
		}
	}
	if want := floodSenders * floodRounds; answered != want {
		out = append(out, fmt.Sprintf("%d of %d unsigned bodies answered; the others: %s", answered, want, strings.Join(r.failed, "; ")))
	}
	if r.statuses[http.StatusUnauthorized] == 0 {
		out = append(out, "no unsigned body was read and refused 401: the intake refused them all")
	}
	if r.healthz == 0 || len(r.healthzBad) > 0 {
		out = append(out, fmt.Sprintf("/healthz during the flood: %d polls, %d not answered 200: %s", r.healthz, len(r.healthzBad), strings.Join(r.healthzBad, "; ")))
	}
	if r.peakRSS > floodRSSBound {
		out = append(out, fmt.Sprintf("peak RSS %d MiB, over the %d MiB safety bound", r.peakRSS>>20, floodRSSBound>>20))
	}
	return out
}

func (r *floodReport) String() string {
	return fmt.Sprintf("%d senders x %d rounds x %d MiB unsigned bodies in %s: peak RSS (VmHWM) %d MiB (%d MiB when ready); answers %v; /healthz %d polls, slowest %s",
		floodSenders, floodRounds, floodBodyBytes>>20, r.took.Round(time.Millisecond), r.peakRSS>>20, r.baseRSS>>20, r.statuses, r.healthz, r.healthzSlowest.Round(time.Millisecond))
}

// 64 connections posting unsigned 10 MiB bodies at once do not take `latestwins serve` past a
// bounded memory: each body is hashed as it streams in, the bodies kept in flight are capped, and
// the rest are refused 503 before being read. /healthz answers throughout.
func TestServeMemoryUnsignedFlood(t *testing.T) {
	r := floodServe(t, binPath)
	t.Logf("serve: %v", r)
	if p := r.problems(); len(p) > 0 {
		t.Fatalf("serve under a flood of unsigned bodies:\n%s\n%v\nserve said (end):\n%s", strings.Join(p, "\n"), r, tail(r.stderr.String(), 20))
	}
}

// The flood test catches the old intake (the app's link-time mutant "readall": bodies read whole
// before the signature is checked, nothing capping them in flight).
func TestServeMemoryUnsignedFloodCatchesReadAll(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and floods the old intake (about 1 GB of memory): not with -short")
	}
	path := filepath.Join(t.TempDir(), "latestwins-readall")
	build := exec.Command("go", "build", "-tags", "latestwins_mutants", "-ldflags", "-X github.com/latestwins/latestwins/app/internal/intake.mutant=readall", "-o", path, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the readall mutant: %v\n%s", err, out)
	}
	r := floodServe(t, path)
	t.Logf("serve with the old intake: %v", r)
	if p := r.problems(); !containsPrefix(p, "peak RSS") {
		t.Fatalf("the flood test did not catch the old intake: problems %q\n%v", p, r)
	}
}

// floodServe starts bin as `latestwins serve` on 127.0.0.1, floods it with unsigned bodies while
// polling /healthz, reads its peak memory and stops it.
func floodServe(t *testing.T, bin string) *floodReport {
	t.Helper()
	f := newBoltFixture(t)
	cfg := f.path("latestwins.yml")
	if err := os.WriteFile(cfg, []byte(floodConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, f, bin, cfg)
	r := &floodReport{statuses: map[int]int{}, stderr: srv.stderr, baseRSS: procMemory(t, srv.pid(), "VmRSS")}

	stopPolling := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		r.healthz, r.healthzBad, r.healthzSlowest = pollHealthz(srv.addr, stopPolling)
	}()
	start := time.Now()
	var mu sync.Mutex
	for round := range floodRounds {
		// Every sender of a round writes its body but the end, and waits for the others to do as much
		// (or to be answered) before it ends it: the round's bodies are all in flight at once.
		var wg, arrived sync.WaitGroup
		wg.Add(floodSenders)
		arrived.Add(floodSenders)
		release := make(chan struct{})
		go func() { arrived.Wait(); close(release) }()
		for i := range floodSenders {
			go func() {
				defer wg.Done()
				code, err := postUnsigned(srv.addr, fmt.Sprintf("flood-%d-%d", i, round), floodBodyBytes, i%2 == 1, arrived.Done, release)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					r.failed = append(r.failed, err.Error())
				} else {
					r.statuses[code]++
				}
			}()
		}
		wg.Wait()
	}
	r.took = time.Since(start)
	close(stopPolling)
	<-polled
	r.peakRSS = procMemory(t, srv.pid(), "VmHWM")
	srv.stop(t)
	return r
}

// serveProc is a running `latestwins serve`.
type serveProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncbuf.Buffer
	done   chan error
}

func (s *serveProc) pid() int { return s.cmd.Process.Pid }

// startServe starts bin serve on a free loopback port and waits until it listens.
func startServe(t *testing.T, f *fixture, bin, cfg string) *serveProc {
	t.Helper()
	cmd := exec.CommandContext(f.ctx, bin, "serve", "--addr", "127.0.0.1:0", "--config", cfg, "--sweep-every", "0")
	cmd.Env = append(f.environ(), "LATESTWINS_WEBHOOK_SECRET="+floodSecret)
	cmd.Dir = f.dir
	cmd.WaitDelay = 10 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s serve: %v", bin, err)
	}
	s := &serveProc{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	addrs := make(chan string, 1)
	go func() {
		// Read serve's stderr to the end, so that its logging never blocks on a full pipe.
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 64<<10), 1<<20)
		for lines.Scan() {
			fmt.Fprintln(s.stderr, lines.Text())
			if _, addr, ok := strings.Cut(lines.Text(), "listening on http://"); ok {
				addr, _, _ = strings.Cut(addr, " ")
				select {
				case addrs <- addr:
				default:
				}
			}
		}
		close(addrs)
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() { s.stop(t) })
	guard := time.NewTimer(procTimeout)
	defer guard.Stop()
	select {
	case addr, ok := <-addrs:
		if !ok {
			t.Fatalf("serve exited before listening:\n%s", s.stderr.String())
		}
		s.addr = addr
	case <-guard.C:
		t.Fatalf("serve did not listen within %s:\n%s", procTimeout, s.stderr.String())
	}
	return s
}

// stop ends serve with SIGTERM, as a supervisor would; it is a no-op once serve has ended.
func (s *serveProc) stop(t *testing.T) {
	t.Helper()
	if s.done == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-s.done; err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, tail(s.stderr.String(), 20))
	}
	s.done = nil
}

// postUnsigned posts one body of size bytes with a signature of zeros over a connection of its own
// and returns the answer's status. It writes the body but its end, calls arrive, waits for release
// and ends the body; an answer given before the body is sent (503, 413) stops the writing and is
// returned even when the server then closes the connection.
func postUnsigned(addr, id string, size int, chunked bool, arrive func(), release <-chan struct{}) (int, error) {
	var once sync.Once
	arrived := func() { once.Do(arrive) }
	defer arrived()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(procTimeout)); err != nil {
		return 0, err
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST /webhook HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n", addr)
	fmt.Fprintf(&head, "X-GitHub-Delivery: %s\r\nX-Hub-Signature-256: sha256=%s\r\nConnection: close\r\n", id, strings.Repeat("0", 64))
	if chunked {
		head.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	} else {
		fmt.Fprintf(&head, "Content-Length: %d\r\n\r\n", size)
	}
	answered := make(chan struct{})
	var resp *http.Response
	var readErr error
	go func() {
		defer close(answered)
		resp, readErr = http.ReadResponse(bufio.NewReader(conn), nil)
		if readErr == nil {
			_ = resp.Body.Close()
		}
	}()
	writeErr := writeBody(conn, head.Bytes(), size, chunked, answered)
	arrived()
	if writeErr == nil {
		select {
		case <-release:
			writeErr = endBody(conn, chunked)
		case <-answered:
		}
	}
	<-answered
	if readErr != nil {
		return 0, fmt.Errorf("%s: no answer: %w (writing: %v)", id, readErr, writeErr)
	}
	return resp.StatusCode, nil
}

// writeBody writes the request head and a body of size bytes ('x') but its end (the last byte, or
// the last chunk), in 64 KiB pieces; it stops once answered is closed or a write fails (the server
// answered early and closed the connection).
func writeBody(w io.Writer, head []byte, size int, chunked bool, answered <-chan struct{}) error {
	if _, err := w.Write(head); err != nil {
		return err
	}
	piece := bytes.Repeat([]byte("x"), 64<<10)
	left := size
	if !chunked {
		left-- // endBody writes it
	}
	for ; left > 0; left -= len(piece) {
		select {
		case <-answered:
			return errors.New("answered before the body was sent")
		default:
		}
		p := piece[:min(len(piece), left)]
		var err error
		if chunked {
			_, err = fmt.Fprintf(w, "%x\r\n%s\r\n", len(p), p)
		} else {
			_, err = w.Write(p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// endBody writes what writeBody left out.
func endBody(w io.Writer, chunked bool) error {
	end := "x"
	if chunked {
		end = "0\r\n\r\n"
	}
	_, err := io.WriteString(w, end)
	return err
}

// pollHealthz asks GET /healthz every healthzEvery until stop is closed, and returns how many
// polls it made, those not answered 200, and the slowest.
func pollHealthz(addr string, stop <-chan struct{}) (polls int, bad []string, slowest time.Duration) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(healthzEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return polls, bad, slowest
		case <-tick.C:
		}
		start := time.Now()
		resp, err := client.Get("http://" + addr + "/healthz")
		took := time.Since(start)
		polls++
		slowest = max(slowest, took)
		switch {
		case err != nil:
			bad = append(bad, err.Error())
		case resp.StatusCode != http.StatusOK:
			bad = append(bad, resp.Status)
		}
		if err == nil {
			_ = resp.Body.Close()
		}
	}
}

// procMemory reads a memory figure (VmRSS, VmHWM) of a process from /proc/PID/status, in bytes.
func procMemory(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("memory of process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/status %s: %q: %v", pid, field, line, err)
		}
		return kb << 10
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
