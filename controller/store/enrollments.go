package store

import "time"

// EnrollmentRecord is one enrollment code as the controller keeps it, in
// the enrollments bucket under its ID: the code's secret only as a hash
// (controller/enrollment makes and checks both).
type EnrollmentRecord struct {
	// ID is the public part of the code, the record's key.
	ID string `json:"id"`
	// SecretHash is the SHA-256 of the code's secret part.
	SecretHash []byte `json:"secretHash"`
	// Node is the one node name the code enrolls; empty for a code that
	// enrolls Uses devices, each naming itself (within NamePrefix).
	Node string `json:"node,omitempty"`
	// NamePrefix, for a code without Node, is the prefix every name it
	// enrolls must have; empty for any.
	NamePrefix string `json:"namePrefix,omitempty"`
	// Labels are set on every node the code enrolls (as node overrides).
	Labels map[string]string `json:"labels,omitempty"`
	// Uses is how many devices the code may enroll; Enrolled lists the
	// nodes it did, in order.
	Uses     int      `json:"uses"`
	Enrolled []string `json:"enrolled,omitempty"`
	// Description is the operator's note.
	Description string    `json:"description,omitempty"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// UsedAt is the last enrollment's time.
	UsedAt time.Time `json:"usedAt,omitzero"`
}

// PutEnrollment stores rec under rec.ID.
func (s *Store) PutEnrollment(rec EnrollmentRecord) error {
	err := s.update(func(tx *boltTx) error { return putJSON(tx, bucketEnrollments, rec.ID, rec) })
	return s.wrap(err, "put enrollment %s", rec.ID)
}

// UpdateEnrollment reads the record of id, lets fn change it and stores
// the result, in one transaction, so two devices racing for a code's last
// use cannot both have it. When the record is absent fn gets found false
// and a zero record; when fn fails nothing is written and its error is
// returned unwrapped.
func (s *Store) UpdateEnrollment(id string, fn func(rec *EnrollmentRecord, found bool) error) (EnrollmentRecord, error) {
	var rec EnrollmentRecord
	var fnErr error
	err := s.update(func(tx *boltTx) error {
		rec = EnrollmentRecord{}
		found, err := getJSON(tx, bucketEnrollments, id, &rec)
		if err != nil {
			return err
		}
		if fnErr = fn(&rec, found); fnErr != nil {
			return fnErr
		}
		return putJSON(tx, bucketEnrollments, id, rec)
	})
	if fnErr != nil {
		return rec, fnErr
	}
	return rec, s.wrap(err, "update enrollment %s", id)
}

// ListEnrollments returns every enrollment record, ordered by ID.
func (s *Store) ListEnrollments() ([]EnrollmentRecord, error) {
	var list []EnrollmentRecord
	err := s.view(func(tx *boltTx) (err error) {
		list, err = listJSON[EnrollmentRecord](tx, bucketEnrollments)
		return err
	})
	return list, s.wrap(err, "list enrollments")
}

// DeleteEnrollment removes the record of id; found says whether it was
// there.
func (s *Store) DeleteEnrollment(id string) (found bool, err error) {
	err = s.update(func(tx *boltTx) error {
		var rec EnrollmentRecord
		if found, err = getJSON(tx, bucketEnrollments, id, &rec); err != nil || !found {
			return err
		}
		return deleteKey(tx, bucketEnrollments, id)
	})
	return found, s.wrap(err, "delete enrollment %s", id)
}
