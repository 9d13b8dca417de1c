package cli

import (
	"context"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// OpenStore opens the store a URL names: bolt://PATH, memory:// or dynamodb://TABLE?region=R&endpoint=URL.
func OpenStore(ctx context.Context, raw string) (authority.Store, func() error, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, nil, usageErrorf("store %q: use bolt://PATH, memory:// or dynamodb://TABLE?region=R", raw)
	}
	switch scheme {
	case "memory":
		return memory.New(), func() error { return nil }, nil
	case "bolt":
		return openBolt(ctx, rest)
	case "dynamodb":
		if _, err := dynamo.ParseURL(raw); err != nil {
			return nil, nil, usageErrorf("%v", err) // a malformed URL is bad configuration: terminal
		}
		return openDynamo(ctx, raw)
	}
	return nil, nil, usageErrorf("store %q: unknown scheme %q; use bolt://PATH, memory:// or dynamodb://TABLE?region=R", raw, scheme)
}

func noClose() error { return nil }
