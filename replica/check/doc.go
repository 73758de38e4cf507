// Package check is the start check of a replicated volume: given what was
// read from each replica directory (a Probe), it decides which replicas
// may serve (RW) and why the others may not (ERR), by Longhorn's rules
// (counter mode, highest revision counter, the 5 s salvage window and
// allocated bytes) plus ours (the volume identity and epoch of
// replica.hdr). It is a pure function: it reads no file, so the rule is
// tested apart from the format.
//
// Package replica reads the directories (replica.Check, Inspect) and
// opens the volume after the check (replica.OpenVolume); this package
// imports nothing of the module.
//
//  1. unreadable metadata or head, or a size other than most replicas': ERR
//  2. recorded counter mode differs from the volume's: ERR
//  3. replica.hdr of another volume (when a strict majority shares one
//     volume id), or an epoch below the highest (demoted by the engine): ERR
//  4. counter on: unreadable counter: ERR; count below the highest: ERR;
//     a replica holding another writer's writes on top of an unclean
//     count of ours, and every sibling at or above that count: ERR, order
//     undecided (Report.Undecided)
//  5. counter off + salvage: candidates have head mtime strictly within
//     5 s of the newest; the one with the most allocated bytes wins, then
//     the later mtime, then the lowest path; all others ERR
//  6. counter off, no salvage: the rest stay RW
package check
