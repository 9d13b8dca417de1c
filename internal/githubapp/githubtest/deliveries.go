package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// deliveriesPath is where the App's webhook delivery log lives.
const deliveriesPath = "/app/hook/deliveries"

// DeliveryLog is the App's webhook delivery log on the fake: GET /app/hook/deliveries lists the
// attempts a test added, newest first, by pages of per_page (GitHub's default 30, at most 100) with
// the next page's cursor in a Link header, and GET /app/hook/deliveries/{delivery_id} answers an
// attempt's request headers and payload. Both need the App's JWT (a bearer token of three
// dot-separated parts), as GitHub does; a request with another token fails the test. The answers
// are checked against GitHub's description like every stub's. A log that is never listed fails
// the test, as an unused stub does.
type DeliveryLog struct {
	srv      *Server
	attempts []*LoggedDelivery // by id, oldest first
	nextID   int64
	listed   int
}

// LoggedDelivery is one attempt in the log.
type LoggedDelivery struct {
	// ID is the attempt's id; Add gives the next one when it is 0.
	ID          int64
	GUID        string // X-GitHub-Delivery: shared by every attempt of one delivery
	DeliveredAt time.Time
	Redelivery  bool
	// StatusCode is what the App answered (0: no answer); Status says it in words ("OK",
	// "failed to connect"); Add fills it in from StatusCode when empty.
	StatusCode int
	Status     string
	Event      string
	Action     string
	// Payload is the JSON object GitHub sent; Header its extra request headers (X-GitHub-Event and
	// X-GitHub-Delivery are added from Event and GUID).
	Payload json.RawMessage
	Header  http.Header
	// FetchStatus, when set, is the status GET of this attempt answers (with a basic-error): 404 for
	// an attempt GitHub no longer keeps, 500 or 502 for GitHub failing.
	FetchStatus int

	fetches int
}

// DeliveryLog returns the fake's delivery log, registering it on first use.
func (s *Server) DeliveryLog() *DeliveryLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deliveries == nil {
		s.deliveries = &DeliveryLog{srv: s, nextID: 1000}
		s.t.Cleanup(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.deliveries.listed == 0 {
				s.t.Errorf("githubtest: the delivery log was never listed (GET %s)", deliveriesPath)
			}
		})
	}
	return s.deliveries
}

// Add appends an attempt to the log and returns it, with its id.
func (l *DeliveryLog) Add(d LoggedDelivery) *LoggedDelivery {
	l.srv.t.Helper()
	if d.GUID == "" || d.Event == "" || d.DeliveredAt.IsZero() {
		l.srv.t.Fatalf("githubtest: DeliveryLog.Add needs a guid, an event and a delivery time")
	}
	if d.Payload != nil && !json.Valid(d.Payload) {
		l.srv.t.Fatalf("githubtest: DeliveryLog.Add(%s): the payload is not valid JSON", d.GUID)
	}
	l.srv.mu.Lock()
	defer l.srv.mu.Unlock()
	if d.ID == 0 {
		l.nextID++
		d.ID = l.nextID
	}
	l.nextID = max(l.nextID, d.ID)
	if d.Status == "" {
		d.Status = "OK"
		switch {
		case d.StatusCode == 0:
			d.Status = "failed to connect to host"
		case d.StatusCode >= 400:
			d.Status = "Invalid HTTP Response: " + strconv.Itoa(d.StatusCode)
		}
	}
	d.DeliveredAt = d.DeliveredAt.UTC().Truncate(time.Second)
	at := &d
	l.attempts = append(l.attempts, at)
	slices.SortFunc(l.attempts, func(a, b *LoggedDelivery) int { return int(a.ID - b.ID) })
	return at
}

// Fetches says how many times GET /app/hook/deliveries/{id} read the attempt.
func (d *LoggedDelivery) Fetches(l *DeliveryLog) int {
	l.srv.mu.Lock()
	defer l.srv.mu.Unlock()
	return d.fetches
}

// serve answers the delivery log's two operations; the request was validated. It returns
// the status and body to send, and the response headers.
func (l *DeliveryLog) serve(r *http.Request) (int, http.Header, []byte) {
	header := http.Header{}
	if !isJWT(r.Header.Get("Authorization")) {
		return basicError(http.StatusUnauthorized, header, "A JSON web token could not be decoded: the delivery log needs the App's JWT, not an installation token")
	}
	l.srv.mu.Lock()
	defer l.srv.mu.Unlock()
	if r.URL.Path == deliveriesPath {
		l.listed++
		return l.list(r, header)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, deliveriesPath+"/"), 10, 64)
	if err != nil {
		return basicError(http.StatusNotFound, header, "Not Found")
	}
	i := slices.IndexFunc(l.attempts, func(d *LoggedDelivery) bool { return d.ID == id })
	if i < 0 {
		return basicError(http.StatusNotFound, header, "Not Found")
	}
	d := l.attempts[i]
	d.fetches++
	if d.FetchStatus != 0 {
		if d.FetchStatus == http.StatusNotFound {
			return basicError(d.FetchStatus, header, "Not Found")
		}
		return basicError(d.FetchStatus, header, http.StatusText(d.FetchStatus))
	}
	reqHeaders := map[string]string{"Accept": "*/*", "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/044aadd",
		"X-GitHub-Delivery": d.GUID, "X-GitHub-Event": d.Event, "X-GitHub-Hook-ID": "42", "X-GitHub-Hook-Installation-Target-Type": "integration"}
	for k := range d.Header {
		reqHeaders[k] = d.Header.Get(k)
	}
	payload := d.Payload
	if payload == nil {
		payload = json.RawMessage("{}")
	}
	item := l.item(d)
	item["url"] = "https://app.example.com/webhook"
	item["request"] = map[string]any{"headers": reqHeaders, "payload": payload}
	item["response"] = map[string]any{"headers": map[string]string{"Content-Type": "application/json"}, "payload": nil}
	body, _ := json.Marshal(item)
	header.Set("Content-Type", "application/json; charset=utf-8")
	return http.StatusOK, header, body
}

// list answers one page, newest first. The cursor is opaque to clients; here it is the id the page
// starts below.
func (l *DeliveryLog) list(r *http.Request, header http.Header) (int, http.Header, []byte) {
	perPage := 30
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return basicError(http.StatusUnprocessableEntity, header, "per_page must be between 1 and 100")
		}
		perPage = n
	}
	below := int64(1) << 62
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(c, "v1_"), 10, 64)
		if err != nil || !strings.HasPrefix(c, "v1_") {
			return basicError(http.StatusBadRequest, header, "Bad cursor")
		}
		below = n
	}
	page := []map[string]any{}
	var last int64
	more := false
	for i := len(l.attempts) - 1; i >= 0; i-- {
		d := l.attempts[i]
		if d.ID >= below {
			continue
		}
		if len(page) == perPage {
			more = true
			break
		}
		page = append(page, l.item(d))
		last = d.ID
	}
	if more {
		q := url.Values{"per_page": {strconv.Itoa(perPage)}, "cursor": {fmt.Sprintf("v1_%d", last)}}
		header.Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, l.srv.URL, deliveriesPath, q.Encode()))
	}
	body, _ := json.Marshal(page)
	header.Set("Content-Type", "application/json; charset=utf-8")
	return http.StatusOK, header, body
}

func (l *DeliveryLog) item(d *LoggedDelivery) map[string]any {
	var action any
	if d.Action != "" {
		action = d.Action
	}
	return map[string]any{"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.Format(time.RFC3339), "redelivery": d.Redelivery,
		"duration": 0.27, "status": d.Status, "status_code": d.StatusCode, "event": d.Event, "action": action,
		"installation_id": 4242, "repository_id": 186853002}
}

func basicError(status int, header http.Header, msg string) (int, http.Header, []byte) {
	header.Set("Content-Type", "application/json; charset=utf-8")
	body, _ := json.Marshal(map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest/apps/webhooks"})
	return status, header, body
}

// isJWT reports whether an Authorization header carries a JSON web token, as the App authenticates.
func isJWT(auth string) bool {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	return ok && strings.Count(tok, ".") == 2
}

// SetFetchStatus changes what GET of the attempt answers (0: its request, again).
func (l *DeliveryLog) SetFetchStatus(d *LoggedDelivery, status int) {
	l.srv.mu.Lock()
	defer l.srv.mu.Unlock()
	d.FetchStatus = status
}
