package store

import (
	"errors"
)

// Txn is one read-write transaction: the writes of one API request, all
// of which Update commits together or none of which it keeps. Its methods
// are those of Store that the request needs, without their own
// transactions. A Txn is valid only inside the function given to Update.
type Txn struct {
	tx      *boltTx
	secrets SecretCipher // the store's; nil writes Secrets in the clear
}

// secretCodec is how t reads and writes Secret records.
func (t *Txn) secretCodec() secretCodec { return secretCodec{cipher: t.secrets} }

// errDryRun rolls back the transaction of a dry run.
var errDryRun = errors.New("dry run")

// Update runs fn in one read-write transaction, committed and fsynced
// before it returns when fn returns nil. When fn fails, or with dryRun,
// nothing fn wrote is kept (a dry run still returns fn's results through
// fn's closure, computed over what the writes would have made).
func (s *Store) Update(dryRun bool, fn func(t *Txn) error) error {
	err := s.update(func(tx *boltTx) error {
		if err := fn(&Txn{tx: tx, secrets: s.secrets}); err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return nil
	}
	return s.wrap(err, "update")
}

// View runs fn in a read-only transaction; fn must not write.
func (s *Store) View(fn func(t *Txn) error) error {
	return s.wrap(s.view(func(tx *boltTx) error { return fn(&Txn{tx: tx, secrets: s.secrets}) }), "view")
}
