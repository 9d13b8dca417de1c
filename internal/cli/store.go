package cli

import (
	"context"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// storeMode is how a command opens a store.
type storeMode int

const (
	// storeCreate may create the store (claim, run, migrate, serve, demo, the Action).
	storeCreate storeMode = iota
	// storeMustExist reads and writes a store that exists (gate, complete, unlock, sweep): a
	// store that was never created holds nothing for them.
	storeMustExist
	// storeReadOnly only reads a store that exists (status, history).
	storeReadOnly
)

// OpenStore opens the store a URL names: bolt://PATH, memory://, dynamodb://TABLE?region=R&endpoint=URL,
// or git refs: git+file:///PATH.git, git+https://HOST/OWNER/REPO.git, github://OWNER/REPO.
// A bolt file is created when missing. getenv gives a git store's host and token (see gitref.Open).
func OpenStore(ctx context.Context, raw string, getenv func(string) string) (authority.Store, func() error, error) {
	return openStore(ctx, raw, storeCreate, getenv)
}

func openStore(ctx context.Context, raw string, mode storeMode, getenv func(string) string) (authority.Store, func() error, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, nil, usageErrorf("store %q: use bolt://PATH, memory://, dynamodb://TABLE?region=R, github://OWNER/REPO or git+file:///PATH.git", raw)
	}
	switch scheme {
	case "memory":
		return memory.New(), func() error { return nil }, nil
	case "bolt":
		return openBolt(ctx, rest, mode)
	case "git+file", "git+https", "git+http", "github":
		return openGit(raw, getenv)
	case "dynamodb":
		if _, err := dynamo.ParseURL(raw); err != nil {
			return nil, nil, usageErrorf("%v", err) // a malformed URL is bad configuration: terminal
		}
		return openDynamo(ctx, raw)
	}
	return nil, nil, usageErrorf("store %q: unknown scheme %q; use bolt://PATH, memory://, dynamodb://TABLE?region=R, github://OWNER/REPO, git+file:///PATH.git or git+https://HOST/OWNER/REPO.git", redactStoreURL(raw), scheme)
}

func noClose() error { return nil }
