package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/latestwins/latestwins/internal/authority"
)

// lostResponse forwards every PutItem to the server and then reports a dead connection: the write
// committed, the client never heard. after, when set, runs between the two (other writers).
type lostResponse struct {
	API
	forwarded atomic.Int64
	after     func(ctx context.Context)
}

func (f *lostResponse) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.forwarded.Add(1)
	if _, err := f.API.PutItem(ctx, in, optFns...); err != nil {
		return nil, err
	}
	if f.after != nil {
		f.after(ctx)
	}
	return nil, networkError("PutItem")
}

// retriedOwnWrite is the SDK's retry after a lost response: the first attempt commits, the second
// attempt of the same request fails the condition against it.
type retriedOwnWrite struct {
	API
	ownFailures atomic.Int64
}

func (f *retriedOwnWrite) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := f.API.PutItem(ctx, in, optFns...); err != nil {
		return nil, err
	}
	_, err := f.API.PutItem(ctx, in, optFns...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		f.ownFailures.Add(1)
	}
	return nil, err
}

// failBefore loses the first `fail` PutItems before they reach the server.
type failBefore struct {
	API
	fail     int64
	attempts atomic.Int64
}

func (f *failBefore) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.attempts.Add(1) <= f.fail {
		return nil, networkError("PutItem")
	}
	return f.API.PutItem(ctx, in, optFns...)
}

// failingReads fails every GetItem.
type failingReads struct{ API }

func (f failingReads) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, networkError("GetItem")
}

// answers returns a fixed error of the service for every PutItem, without writing.
type answers struct {
	API
	err      error
	attempts atomic.Int64
}

func (f *answers) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.attempts.Add(1)
	return nil, f.err
}

func envDoc(name string, rev, desired int64) *authority.Doc {
	return &authority.Doc{Key: authority.EnvKey(name), Rev: rev, Env: &authority.Env{Name: name, Desired: desired, Observed: desired}}
}

// seed stores revisions 1..rev of env through a plain store.
func seed(t *testing.T, s *Store, name string, rev int64) {
	t.Helper()
	for r := range rev {
		if _, err := s.Put(t.Context(), envDoc(name, r, r+1)); err != nil {
			t.Fatal(err)
		}
	}
}

func wantStored(t *testing.T, s *Store, name string, rev, desired int64) {
	t.Helper()
	d, err := s.Get(t.Context(), authority.EnvKey(name))
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	if d.Rev != rev || d.Env.Desired != desired {
		t.Fatalf("stored %s: revision %d, desired %d; want revision %d, desired %d", name, d.Rev, d.Env.Desired, rev, desired)
	}
}

func TestCommittedWriteWithLostResponse(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	plain := New(client, table)
	for _, base := range []int64{0, 3} {
		name := fmt.Sprintf("lost-%d", base)
		seed(t, plain, name, base)
		f := &lostResponse{API: client}
		rev, err := New(f, table).Put(t.Context(), envDoc(name, base, 100))
		if err != nil || rev != base+1 {
			t.Fatalf("Put at revision %d whose response was lost = %d, %v; want success with revision %d", base, rev, err, base+1)
		}
		if n := f.forwarded.Load(); n != 1 {
			t.Fatalf("a committed write was sent %d times; want once", n)
		}
		wantStored(t, plain, name, base+1, 100)
	}
}

func TestRetryFailingOnItsOwnWrite(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	plain := New(client, table)
	for _, base := range []int64{0, 2} {
		name := fmt.Sprintf("own-%d", base)
		seed(t, plain, name, base)
		f := &retriedOwnWrite{API: client}
		rev, err := New(f, table).Put(t.Context(), envDoc(name, base, 100))
		if f.ownFailures.Load() != 1 {
			t.Fatalf("the second attempt did not fail its condition; the fault was not injected")
		}
		if err != nil || rev != base+1 {
			t.Fatalf("Put at revision %d whose retry failed on its own write = %d, %v; want success with revision %d", base, rev, err, base+1)
		}
		wantStored(t, plain, name, base+1, 100)
	}
}

func TestWriteLostBeforeSending(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	plain := New(client, table)
	seed(t, plain, "before-1", 1)

	// Never reaches the server: an error, neither success nor a conflict, and nothing stored.
	f := &failBefore{API: client, fail: 1 << 30}
	if rev, err := New(f, table).Put(t.Context(), envDoc("before-1", 1, 100)); err == nil || errors.Is(err, authority.ErrConflict) {
		t.Fatalf("Put that never reached the server = %d, %v; want an error that is not a conflict", rev, err)
	}
	if n := f.attempts.Load(); n != maxPutAttempts {
		t.Fatalf("%d attempts; want %d (bounded retries of a write that provably did not commit)", n, maxPutAttempts)
	}
	wantStored(t, plain, "before-1", 1, 1)
	if rev, err := New(f, table).Put(t.Context(), envDoc("before-new", 0, 1)); err == nil {
		t.Fatalf("Put of a new document that never reached the server = %d, nil", rev)
	}
	if _, err := plain.Get(t.Context(), authority.EnvKey("before-new")); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("a write that never reached the server stored something: %v", err)
	}

	// Lost once, then sent again: the retry commits.
	f = &failBefore{API: client, fail: 1}
	if rev, err := New(f, table).Put(t.Context(), envDoc("before-1", 1, 100)); err != nil || rev != 2 {
		t.Fatalf("Put lost once before sending = %d, %v; want revision 2 after a retry", rev, err)
	}
	if n := f.attempts.Load(); n != 2 {
		t.Fatalf("%d attempts; want 2", n)
	}
	wantStored(t, plain, "before-1", 2, 100)
}

func TestLostResponseThenOtherWriters(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	plain := New(client, table)
	// Other processes read the document and write it again between the commit and the re-read.
	// Up to historyLen-1 of them, the write is still recognised as committed by its write id.
	for _, tc := range []struct {
		others  int
		succeed bool
	}{{1, true}, {historyLen - 1, true}, {historyLen, false}} {
		name := fmt.Sprintf("overwritten-%d", tc.others)
		seed(t, plain, name, 1)
		f := &lostResponse{API: client}
		f.after = func(ctx context.Context) {
			other := New(client, table)
			for range tc.others {
				d, err := other.Get(ctx, authority.EnvKey(name))
				if err != nil {
					t.Error(err)
					return
				}
				d.Env.Desired++
				if _, err := other.Put(ctx, d); err != nil {
					t.Error(err)
					return
				}
			}
		}
		rev, err := New(f, table).Put(t.Context(), envDoc(name, 1, 100))
		switch {
		case tc.succeed && (err != nil || rev != 2):
			t.Errorf("%d later writes: Put = %d, %v; want success with revision 2", tc.others, rev, err)
		case !tc.succeed && !errors.Is(err, authority.ErrConflict):
			t.Errorf("%d later writes, beyond the write-id history: Put = %d, %v; want ErrConflict (the Authority re-reads)", tc.others, rev, err)
		}
		wantStored(t, plain, name, int64(2+tc.others), int64(100+tc.others))
	}
}

func TestUnresolvableWrite(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	seed(t, New(client, table), "unknown", 1)
	f := failingReads{API: &lostResponse{API: client}}
	rev, err := New(f, table).Put(t.Context(), envDoc("unknown", 1, 100))
	if err == nil || errors.Is(err, authority.ErrConflict) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("Put whose response and re-read were lost = %d, %v; want an 'outcome unknown' error that is not a conflict", rev, err)
	}
}

func TestServiceErrorsAreNotConflicts(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	for _, svcErr := range []error{
		&types.ProvisionedThroughputExceededException{Message: new("slow down")},
		&types.RequestLimitExceeded{Message: new("slow down")},
		&types.InternalServerError{Message: new("oops")},
	} {
		f := &answers{API: client, err: svcErr}
		s := New(f, table)
		_, err := s.Put(t.Context(), envDoc("throttled", 0, 1))
		if err == nil || errors.Is(err, authority.ErrConflict) || !errors.Is(err, svcErr) {
			t.Errorf("Put answered %T: %v; want that error, not a conflict", svcErr, err)
		}
		if n := f.attempts.Load(); n != 1 {
			t.Errorf("Put answered %T was sent %d times; the SDK retries service errors, the store must not", svcErr, n)
		}
		// Through the Authority: neither held nor a conflict.
		a := authority.New(s)
		_, err = a.Acquire(t.Context(), "refresh", "host:1", "refresh", authority.DefaultLeaseTTL)
		if err == nil || errors.Is(err, authority.ErrLeaseHeld) || errors.Is(err, authority.ErrConflict) {
			t.Errorf("Acquire over a store answering %T: %v; want a store error, not held", svcErr, err)
		}
	}
}
