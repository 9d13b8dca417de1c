package memory_test

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) authority.Store { return memory.New() })
}

func TestMove(t *testing.T) {
	fresh := func(t *testing.T) authority.Store { return memory.New() }
	storetest.RunMove(t, fresh, fresh)
}

func TestConformanceSplit(t *testing.T) {
	storetest.RunSplit(t, func(t *testing.T) authority.Store { return memory.New() })
}
