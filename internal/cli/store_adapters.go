package cli

import (
	"context"
	"fmt"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/dynamo"
)

func openBolt(_ context.Context, path string) (authority.Store, func() error, error) {
	if path == "" {
		return nil, nil, usageErrorf("store bolt://: give a file path, e.g. bolt://./latestwins.db")
	}
	st, err := bolt.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return st, st.Close, nil
}

func openDynamo(ctx context.Context, raw string) (authority.Store, func() error, error) {
	st, err := dynamo.Open(ctx, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return st, noClose, nil
}

func migrateStore(ctx context.Context, c *cmdEnv) error {
	st, closeFn, err := OpenStore(ctx, c.s.store)
	if err != nil {
		return err
	}
	defer closeFn()
	switch s := st.(type) {
	case *bolt.Store:
		if err := s.Migrate(ctx); err != nil {
			return err
		}
		c.printf("bolt store %s is at schema version 1\n", s.Path())
	case *dynamo.Store:
		rep, err := s.Migrate(ctx)
		if err != nil {
			return err
		}
		if c.s.jsonOut {
			return c.printJSON(rep)
		}
		c.printf("%s\n", rep)
	default:
		c.printf("%s needs no migration\n", c.s.store)
	}
	return nil
}
