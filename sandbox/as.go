package sandbox

import "reflect"

// HandleWrapper is implemented by a Handle that wraps another: the guard's
// handles and the decorators applied to them (GuardOptions.Decorate). As
// walks the chain of Unwrap calls.
type HandleWrapper interface {
	// Unwrap returns the handle this one wraps.
	Unwrap() Handle
}

// ProviderWrapper is implemented by a Provider that wraps another, as the
// one Guard returns does. ProviderAs walks the chain of Unwrap calls.
type ProviderWrapper interface {
	// Unwrap returns the provider this one wraps.
	Unwrap() Provider
}

var (
	handleType   = reflect.TypeFor[Handle]()
	providerType = reflect.TypeFor[Provider]()
)

// As is the escape hatch from the portable Handle to a provider's own
// type, like errors.As: it walks h and the handles reached by Unwrap
// (HandleWrapper), and sets *target to the first one assignable to it,
// reporting whether it found one. target must be a non-nil pointer to a
// type that implements Handle or to an interface type (an optional
// interface a backend handle offers); As panics otherwise.
//
// A provider exposes its backend handle with a function over As (see
// docker.ContainerID), never by asserting the Handle's dynamic type, which
// fails once the handle is guarded or decorated.
func As(h Handle, target any) bool {
	return as(h, target, handleType, func(x any) (any, bool) {
		w, ok := x.(HandleWrapper)
		if !ok {
			return nil, false
		}
		u := w.Unwrap()
		return u, u != nil
	})
}

// ProviderAs is As for providers: it walks p and the providers reached by
// Unwrap (ProviderWrapper) and sets *target to the first one assignable to
// it. target must be a non-nil pointer to a type that implements Provider
// or to an interface type (a management interface, io.Closer); ProviderAs
// panics otherwise.
func ProviderAs(p Provider, target any) bool {
	return as(p, target, providerType, func(x any) (any, bool) {
		w, ok := x.(ProviderWrapper)
		if !ok {
			return nil, false
		}
		u := w.Unwrap()
		return u, u != nil
	})
}

func as(x, target any, base reflect.Type, unwrap func(any) (any, bool)) bool {
	if target == nil {
		panic("sandbox: As target must be a non-nil pointer")
	}
	val := reflect.ValueOf(target)
	typ := val.Type()
	if typ.Kind() != reflect.Pointer || val.IsNil() {
		panic("sandbox: As target must be a non-nil pointer")
	}
	want := typ.Elem()
	if want.Kind() != reflect.Interface && !want.Implements(base) {
		panic("sandbox: As target must point to an interface or to a type implementing " + base.String())
	}
	for x != nil {
		if reflect.TypeOf(x).AssignableTo(want) {
			val.Elem().Set(reflect.ValueOf(x))
			return true
		}
		var ok bool
		if x, ok = unwrap(x); !ok {
			return false
		}
	}
	return false
}
