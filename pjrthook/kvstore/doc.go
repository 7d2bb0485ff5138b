// Package kvstore is the small key-value store the ranks of one run share while their PJRT
// clients start: rank 0 serves it over TCP at the launcher's coordinator address (Serve), every
// rank, rank 0 included, talks to it through a Client: Put, TryGet (answers at once, ErrNotFound
// when the key is absent) and Get (waits for the key up to a timeout). XLA's GPU plugin swaps its
// topology and NCCL ids through these three verbs at client creation.
//
// Why a coordinator in rank 0 and not etcd: the store lives for one run and holds a few hundred
// bytes per rank; JAX and torch launch the same way, so the launchers already hand every rank the
// address (JAX_COORDINATOR_ADDRESS, MASTER_ADDR:MASTER_PORT). An etcd cluster would be one more
// service to deploy, secure and keep alive beside every job, for no gain at this size.
//
// The wire is one request per frame: a byte verb, then length-prefixed key and value
// (big-endian uint32), answered by a status byte and a length-prefixed value. Keys and values are
// at most MaxSize bytes; a frame that says more is refused and its connection closed. Every dial
// and read has a deadline, so a dead coordinator gives an error naming its address, never a
// hang. Serve and Client are safe for concurrent use.
package kvstore
