package gitref

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// A ref's history is kept bounded. Every commit says how long its ref's chain is (the commits from
// the newest root, itself included), and a write that would make the chain longer than
// compactEvery is a root commit instead: the state it holds, no parent. What came before it is
// unreachable once the push lands, and the server's gc deletes it. The compaction is the write's
// own push, under the same compare-and-swap as any write, so it costs no request.
//
// A push whose answer was lost is settled from the ref as it is then (Store.settle). A compaction
// may have cut the chain between the tip and that push's commit, so a document's commit also
// names the commits of the keptWrites writes before it (their revisions and hashes): a push is
// settled by finding its commit among those, not by walking the parents. Records need no such list:
// a records write is settled by its content (PutRecords reads the ref again and finds its records
// there, or pushes them again).
const (
	// defaultCompactEvery bounds the commits reachable from each ref.
	defaultCompactEvery = 64
	// keptWrites is how many earlier writes a document's commit names: a lost answer is settled
	// from the tip as long as fewer writes than that came after it (or the chain since the push
	// is still whole). Past that its outcome is unknown, and the Put says so.
	keptWrites = 32
)

// Trailer lines of the commits the Store writes.
const (
	chainLine = "chain"
	afterLine = "after"
)

// written is one write of a document: its revision and its commit.
type written struct {
	rev  int64
	hash plumbing.Hash
}

// history is what a commit says of its ref's history.
type history struct {
	// chain is the number of commits from the newest root to this one, this one included; zero for a
	// commit that does not say (an earlier version's, whose chain is of unknown length).
	chain int
	// after names the writes of the document before this commit's, newest first (documents only).
	after []written
}

// next is the history of a commit written on parent (zero: none), whose own history is h: its
// parent, cut to zero when the chain is at its bound, and its chain's length.
func (h history) next(parent plumbing.Hash, every int) (plumbing.Hash, int) {
	switch {
	case parent.IsZero():
		return parent, 1
	case h.chain == 0 || h.chain >= every:
		return plumbing.ZeroHash, 1
	}
	return parent, h.chain + 1
}

// covers returns the commit of revision rev when the list names it.
func (h history) covers(rev int64) (plumbing.Hash, bool) {
	for _, w := range h.after {
		if w.rev == rev {
			return w.hash, true
		}
	}
	return plumbing.ZeroHash, false
}

// trailer is the history's lines, for the end of a commit message.
func (h history) trailer() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d\n", chainLine, h.chain)
	for _, w := range h.after {
		fmt.Fprintf(&b, "%s %d %s\n", afterLine, w.rev, w.hash)
	}
	return b.String()
}

// parseHistory reads the trailer lines of a commit message; lines it does not know are skipped,
// so a commit of an earlier version reads as one of unknown history.
func parseHistory(msg string) history {
	var h history
	for _, line := range strings.Split(msg, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == chainLine:
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				h.chain = n
			}
		case len(f) == 3 && f[0] == afterLine && len(f[2]) == 40:
			rev, err := strconv.ParseInt(f[1], 10, 64)
			if hash := plumbing.NewHash(f[2]); err == nil && hash.String() == f[2] {
				h.after = append(h.after, written{rev: rev, hash: hash})
			}
		}
	}
	return h
}

// kept is the list a commit written after the commit of revision rev, hash, names: that write, and
// what it named, up to keep of them.
func kept(rev int64, hash plumbing.Hash, before []written, keep int) []written {
	if hash.IsZero() || keep <= 0 {
		return nil
	}
	out := append([]written{{rev: rev, hash: hash}}, before...)
	return out[:min(len(out), keep)]
}
