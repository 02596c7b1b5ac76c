package controller

import "time"

// rejectLogInterval is how often the controller logs the malformed
// messages of one node: at most one line per node and interval, the next
// carrying suppressed=N (Controller.rejectLog), so a node publishing them
// as fast as its link allows cannot fill the controller's disk.
const rejectLogInterval = time.Minute

// maxRejectLogKeys bounds the nodes Controller.rejectLog remembers; past
// it, after forgetting the quiet ones, further nodes share one record.
const maxRejectLogKeys = 4096
