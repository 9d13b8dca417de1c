// Package dynamo is the DynamoDB adapter of authority.Store: one item per document, every write one
// conditional PutItem on the document's revision, and a sparse index of environments with pending
// work. A write whose outcome the client could not see (a lost response, or a retry that failed the
// condition against the write's own earlier attempt) is resolved by a consistent read of the write
// id before the Store answers. docs/design.md explains the table and every condition.
package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/latestwins/latestwins/internal/authority"
)

// Attribute and index names of the table.
const (
	attrPK         = "pk"         // S: the document key, "env#NAME", "lease#NAME" or "meta#schema"; a counter's, "counter#NAME"
	attrRev        = "rev"        // N: the document's revision, 1 for the first write
	attrWID        = "wid"        // S: the random id of the write that stored this revision
	attrWIDs       = "wids"       // L of S: ids of the newest writes, newest first (wid included)
	attrEnv        = "env"        // M: authority.Env as the first layout stored it (read, never written)
	attrHot        = "hot"        // S: an environment's state in its compact stored form (authority.EncodeEnv)
	attrEvent      = "event"      // M: a record's authority.Event
	attrIntent     = "intent"     // M: a record's authority.IntentRecord
	attrExpires    = "expires"    // S: a record's expiry, exact (TTLAttribute has whole seconds)
	attrLease      = "lease"      // M: authority.NamedLease
	attrDeliveries = "deliveries" // M: authority.DeliveryCursor, on the App's delivery cursor
	attrKept       = "kept"       // S: a value kept beside an environment (authority.Doc.Kept, Record.Kept), as JSON
	attrPending    = "pending"    // S: pendingValue while the environment has pending work, absent otherwise
	attrCount      = "count"      // N: a counter's value (Store.Add), the only attribute of a counter's item besides pk

	// PendingIndex is the sparse global secondary index of environments with pending work.
	PendingIndex = "pending"
	pendingValue = "env"

	envPrefix = "env#"
)

const (
	// historyLen is how many write ids an item keeps. A write whose response was lost is still
	// recognised as committed when up to historyLen-1 other writes landed on the document before
	// the re-read.
	historyLen = 16
	// maxPutAttempts bounds the attempts of one Put whose earlier attempts provably did not commit.
	maxPutAttempts = 3
	// maxRemembered bounds the write-id histories a Store keeps in memory.
	maxRemembered = 4096
)

// API is the part of the DynamoDB client the Store reads and writes documents with.
// *dynamodb.Client satisfies it; tests wrap it to inject faults.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Scanner lists a table's items; *dynamodb.Client satisfies it. Only latestwins migrate scans (see
// Environments), so the App's role need not allow it.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var (
	_ API             = (*dynamodb.Client)(nil)
	_ authority.Store = (*Store)(nil)
)

// Store keeps authority documents in one DynamoDB table. It is safe for concurrent use.
type Store struct {
	api    API
	tables TableAdmin
	ttl    TTLAdmin
	table  string
	log    *slog.Logger

	mu      sync.Mutex
	history map[string]history // key -> write ids of the newest revision this Store saw
}

// history is the write-id list of one stored revision, newest first.
type history struct {
	rev  int64
	wids []string
}

// Option configures a Store.
type Option func(*settings)

type settings struct {
	log        *slog.Logger
	tables     TableAdmin
	ttl        TTLAdmin
	clientOpts []func(*dynamodb.Options)
}

// WithLogger sets the logger (default: discard). Resolved ambiguous writes are logged at Warn.
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.log = l } }

// WithAdmin sets the table administration Migrate uses. By default New takes it from the API value
// when that implements TableAdmin and TTLAdmin, as *dynamodb.Client does.
func WithAdmin(tables TableAdmin, ttl TTLAdmin) Option {
	return func(s *settings) { s.tables, s.ttl = tables, ttl }
}

// WithClientOptions adds options to the DynamoDB client, such as middleware in APIOptions (the
// benchmarks count requests that way). They apply to the client Open builds, and to a
// *dynamodb.Client given to New, which is copied with them; other API values ignore them.
func WithClientOptions(fns ...func(*dynamodb.Options)) Option {
	return func(s *settings) { s.clientOpts = append(s.clientOpts, fns...) }
}

// New returns a Store over api and table. The table must exist (see Migrate).
func New(api API, table string, opts ...Option) *Store {
	var st settings
	for _, o := range opts {
		o(&st)
	}
	if c, ok := api.(*dynamodb.Client); ok && len(st.clientOpts) > 0 {
		api = dynamodb.New(c.Options(), st.clientOpts...)
	}
	s := &Store{api: api, table: table, log: st.log, tables: st.tables, ttl: st.ttl, history: map[string]history{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tables == nil {
		s.tables, _ = api.(TableAdmin)
	}
	if s.ttl == nil {
		s.ttl, _ = api.(TTLAdmin)
	}
	return s
}

// Table is the name of the table the Store uses.
func (s *Store) Table() string { return s.table }

// Get implements authority.Store with a strongly consistent read.
func (s *Store) Get(ctx context.Context, key string) (*authority.Doc, error) {
	item, err := s.read(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	_, record := item[attrExpires]
	if _, counter := item[attrCount]; item == nil || record || counter {
		return nil, fmt.Errorf("get %s: %w", key, authority.ErrNotFound)
	}
	doc, h, err := decodeItem(item)
	if err != nil {
		return nil, fmt.Errorf("get %s from table %s: %w", key, s.table, err)
	}
	s.remember(key, h)
	return doc, nil
}

// read returns the item under key, or nil when there is none. With attrs, only those attributes.
func (s *Store) read(ctx context.Context, key string, attrs ...string) (map[string]types.AttributeValue, error) {
	in := &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	}
	if len(attrs) > 0 {
		in.ExpressionAttributeNames = map[string]string{}
		names := make([]string, len(attrs))
		for i, a := range attrs {
			names[i] = fmt.Sprintf("#a%d", i)
			in.ExpressionAttributeNames[names[i]] = a
		}
		in.ProjectionExpression = aws.String(strings.Join(names, ", "))
	}
	out, err := s.api.GetItem(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("read table %s: %w", s.table, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// Put implements authority.Store: one PutItem, conditional on the stored revision being doc.Rev
// (on the item being absent when doc.Rev is 0). When the write fails, the item is re-read to find
// out whether this write committed all the same; see resolve.
func (s *Store) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("put %s (not written): %w", doc.Key, err)
	}
	wid, err := newWriteID()
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", doc.Key, err)
	}
	h := history{rev: doc.Rev + 1, wids: s.nextHistory(doc.Key, doc.Rev, wid)}
	item, err := encodeItem(doc, h)
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", doc.Key, err)
	}
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if doc.Rev == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": attrPK}
	} else {
		in.ConditionExpression = aws.String("#rev = :rev")
		in.ExpressionAttributeNames = map[string]string{"#rev": attrRev}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":rev": number(doc.Rev)}
	}

	for attempt := 1; ; attempt++ {
		_, perr := s.api.PutItem(ctx, in)
		if perr == nil {
			s.remember(doc.Key, h)
			return h.rev, nil
		}
		r := s.resolve(ctx, doc, wid, perr)
		switch r.outcome {
		case committed:
			s.log.WarnContext(ctx, "write committed although the client reported an error",
				"table", s.table, "key", doc.Key, "rev", h.rev, "error", perr)
			s.remember(doc.Key, h)
			return h.rev, nil
		case conflicted:
			return 0, fmt.Errorf("put %s at revision %d: stored revision is %d: %w", doc.Key, doc.Rev, r.stored, authority.ErrConflict)
		case notCommitted:
			if attempt < maxPutAttempts && transient(perr) {
				s.log.InfoContext(ctx, "write did not commit; retrying", "table", s.table, "key", doc.Key, "attempt", attempt, "error", perr)
				if err := pause(ctx, attempt); err != nil {
					return 0, fmt.Errorf("put %s at revision %d: %w", doc.Key, doc.Rev, errors.Join(perr, err))
				}
				continue
			}
			return 0, fmt.Errorf("put %s at revision %d in table %s (not written): %w", doc.Key, doc.Rev, s.table, perr)
		default:
			return 0, fmt.Errorf("put %s at revision %d in table %s: outcome unknown, the write may have committed: %w",
				doc.Key, doc.Rev, s.table, errors.Join(perr, r.err))
		}
	}
}

// Add implements authority.Store: one UpdateItem that ADDs delta to the item's count (DynamoDB
// creates the item, and the attribute at 0, when absent) and returns the value it made; delta 0
// is a consistent GetItem. The SDK sends the request again after a lost response, which may add
// twice: the value of the first addition is then skipped. The condition keeps the addition off an
// item that is no counter (a document, a record).
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if delta < 0 {
		return 0, fmt.Errorf("add %d to counter %s: %w", delta, key, authority.ErrInvalidInput)
	}
	if delta == 0 {
		item, err := s.read(ctx, key, attrPK, attrCount)
		if err != nil {
			return 0, fmt.Errorf("read counter %s: %w", key, err)
		}
		if item == nil {
			return 0, nil
		}
		n, err := decodeCount(item)
		if err != nil {
			return 0, fmt.Errorf("read counter %s in table %s: %w", key, s.table, err)
		}
		return n, nil
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("ADD #count :delta"),
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR attribute_exists(#count)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#count": attrCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":delta": number(delta)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return 0, fmt.Errorf("add %d to counter %s in table %s: the item under the key is no counter: %w", delta, key, s.table, err)
	case err != nil:
		return 0, fmt.Errorf("add %d to counter %s in table %s (it may have been added): %w", delta, key, s.table, err)
	}
	n, err := decodeCount(out.Attributes)
	if err != nil {
		return 0, fmt.Errorf("add %d to counter %s in table %s: the answer: %w", delta, key, s.table, err)
	}
	return n, nil
}

// decodeCount reads the value of a counter's item.
func decodeCount(item map[string]types.AttributeValue) (int64, error) {
	av, ok := item[attrCount].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("the item holds no number %q: it is no counter", attrCount)
	}
	n, err := strconv.ParseInt(av.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %q: %w", attrCount, err)
	}
	return n, nil
}

type outcome int

const (
	unknown      outcome = iota // the re-read failed
	committed                   // this write is stored (or was, before newer writes)
	conflicted                  // another write holds the revision this one was based on
	notCommitted                // the stored revision is still the one this write was based on
)

type resolution struct {
	outcome outcome
	stored  int64 // the stored revision, for the conflict message
	err     error // the re-read's error, when unknown
}

// resolve decides what became of a failed PutItem by its write id. The SDK retries network errors,
// so a conditional failure can be the write's own earlier attempt, and a network error can follow
// a commit. The item a failed condition returns (ALL_OLD) is used when the server sends it;
// otherwise the item is read with ConsistentRead.
func (s *Store) resolve(ctx context.Context, doc *authority.Doc, wid string, perr error) resolution {
	var item map[string]types.AttributeValue
	var ccf *types.ConditionalCheckFailedException
	isCCF := errors.As(perr, &ccf)
	if isCCF && len(ccf.Item) > 0 {
		item = ccf.Item
	} else {
		var err error
		if item, err = s.read(ctx, doc.Key, attrPK, attrRev, attrWID, attrWIDs); err != nil {
			return resolution{outcome: unknown, err: err}
		}
	}
	stored := history{}
	if item != nil {
		var err error
		if stored, err = decodeHistory(item); err != nil {
			return resolution{outcome: unknown, err: err}
		}
	}
	switch {
	case slices.Contains(stored.wids, wid):
		return resolution{outcome: committed, stored: stored.rev}
	case stored.rev == doc.Rev && !isCCF:
		return resolution{outcome: notCommitted, stored: stored.rev}
	default:
		// Another revision is stored, or a failed condition meets the revision it asked for, which
		// only a document deleted and written again can cause: either way, read and re-apply.
		if item != nil {
			s.remember(doc.Key, stored)
		}
		return resolution{outcome: conflicted, stored: stored.rev}
	}
}

// transient reports whether a write that did not commit may be tried again: a transport error,
// not an answer of the service (throttling, validation), which the SDK has already retried or
// which cannot change.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var api smithy.APIError
	return !errors.As(err, &api)
}

func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pending implements authority.Store: the environments in the sparse index, sorted. The index is
// eventually consistent; the sweep that uses it re-reads each environment before acting.
func (s *Store) Pending(ctx context.Context) ([]string, error) {
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(PendingIndex),
		KeyConditionExpression:    aws.String("#pending = :env"),
		ExpressionAttributeNames:  map[string]string{"#pending": attrPending},
		ExpressionAttributeValues: map[string]types.AttributeValue{":env": &types.AttributeValueMemberS{Value: pendingValue}},
	})
	var out []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query index %s of table %s: %w", PendingIndex, s.table, err)
		}
		for _, item := range page.Items {
			pk, ok := item[attrPK].(*types.AttributeValueMemberS)
			if !ok {
				continue
			}
			if name, ok := strings.CutPrefix(pk.Value, envPrefix); ok {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// nextHistory returns the write ids to store with a write of revision rev+1: wid, then those of
// revision rev when this Store knows them.
func (s *Store) nextHistory(key string, rev int64, wid string) []string {
	wids := []string{wid}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.history[key]; ok && h.rev == rev && rev > 0 {
		wids = append(wids, h.wids[:min(len(h.wids), historyLen-1)]...)
	}
	return wids
}

func (s *Store) remember(key string, h history) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.history[key]; ok && old.rev > h.rev {
		return
	}
	if len(s.history) >= maxRemembered {
		clear(s.history)
	}
	s.history[key] = h
}

func newWriteID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("write id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Environments lists every environment in the table with a Scan: for latestwins migrate only,
// never on a request path (the sweep uses the pending index).
func (s *Store) Environments(ctx context.Context) ([]string, error) {
	scanner, ok := s.api.(Scanner)
	if w, unwraps := s.api.(interface{ Unwrap() API }); !ok && unwraps {
		scanner, ok = w.Unwrap().(Scanner)
	}
	if !ok {
		return nil, fmt.Errorf("list the environments of table %s: the client given to the store cannot scan (pass a *dynamodb.Client)", s.table)
	}
	p := dynamodb.NewScanPaginator(scanner, &dynamodb.ScanInput{
		TableName:                 aws.String(s.table),
		ProjectionExpression:      aws.String("#pk"),
		FilterExpression:          aws.String("begins_with(#pk, :env)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":env": &types.AttributeValueMemberS{Value: envPrefix}},
	})
	var out []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan table %s: %w", s.table, err)
		}
		for _, item := range page.Items {
			if pk, ok := item[attrPK].(*types.AttributeValueMemberS); ok {
				if name, ok := strings.CutPrefix(pk.Value, envPrefix); ok {
					out = append(out, name)
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
