package memstore_test

import (
	"testing"

	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Backend {
			return storetest.Backend{Store: memstore.New(memstore.Options{}), NoChildReason: "in-process locker"}
		},
	})
}
