package memstore_test

import (
	"testing"
	"time"

	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Backend {
			return storetest.Backend{Store: memstore.New(memstore.Options{}), NoChildReason: "in-process locker"}
		},
		NewWithClock: func(t *testing.T, now func() time.Time) storetest.Backend {
			return storetest.Backend{Store: memstore.New(memstore.Options{Now: now}), NoChildReason: "in-process locker"}
		},
	})
}
