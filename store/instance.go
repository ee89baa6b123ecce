package store

import (
	"context"
	"time"
)

// Instance maps a sandbox key to the provider sandbox that serves it. The
// key is the caller's (a canonical encoding of what identifies the
// sandbox); the rest says where to resume it.
//
// Optional fields are empty strings when absent; a store keeps them as SQL
// NULL.
type Instance struct {
	// Key identifies the record. Required.
	Key string
	// Provider is the name of the provider that owns the sandbox. Required.
	Provider string
	// ProviderSandboxID is the provider's id for the sandbox. Empty means
	// the sandbox was reclaimed (keep-alive) and only its snapshot, if any,
	// remains: the next ensure restores or recreates it.
	ProviderSandboxID string
	// LatestSnapshotID is the snapshot to restore from; optional.
	LatestSnapshotID string
	// ThreadID is the conversation thread the sandbox belongs to. Required.
	ThreadID string
	// LatestRunID is the last run that used the sandbox; optional.
	LatestRunID string
	// DefinitionID names the sandbox definition it was built from; optional.
	DefinitionID string
	// Tenant scopes the record; optional.
	Tenant string
	// CreatedAt is when the key was first stored. On PutInstance a zero value
	// keeps the stored record's CreatedAt (or uses the current time for a new
	// key).
	CreatedAt time.Time
	// UpdatedAt is kept as epoch milliseconds. On PutInstance a zero value
	// means the current time.
	UpdatedAt time.Time
}

// InstanceFilter selects instances for ListInstances. Zero fields do not
// filter.
type InstanceFilter struct {
	// Provider, when set, keeps records of that provider only.
	Provider string
	// ThreadID, when set, keeps records of that thread only.
	ThreadID string
	// Tenant, when set, keeps records of that tenant only.
	Tenant string
	// UpdatedBefore, when set, keeps records whose UpdatedAt is strictly
	// before it (compared in milliseconds): the stale ones a collector prunes.
	UpdatedBefore time.Time
	// Limit caps the number of records; 0 means no cap. Negative is invalid.
	Limit int
}

// InstanceStore is the sandbox key → provider sandbox map.
type InstanceStore interface {
	// GetInstance returns the record for key. A missing key is
	// (Instance{}, false, nil), never an error.
	GetInstance(ctx context.Context, key string) (Instance, bool, error)
	// PutInstance stores inst under inst.Key, replacing the whole record: an
	// optional field left empty clears what was stored (it is never merged
	// with the previous record). Missing required fields are InvalidArgument.
	PutInstance(ctx context.Context, inst Instance) error
	// DeleteInstance removes the record for key. A missing key is a no-op.
	DeleteInstance(ctx context.Context, key string) error
	// ListInstances returns the records that match f, ordered by UpdatedAt
	// and then Key, both ascending.
	ListInstances(ctx context.Context, f InstanceFilter) ([]Instance, error)
}
