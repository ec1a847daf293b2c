// `mpirun -n N datasynth generate ...` (N > 1): the record ids spread over
// the ranks, one output byte-identical to a single process's (docs/scale.md).
//
// Attempt k is a pure function of (seed, k) (docs/generate.md,
// Reproducibility), so the ranks can sample any ids in any order. The run
// proceeds in rounds; a round covers the next `need / valid share` attempt
// ids (the share seen so far), cut into at least 16 parts of at most 4096 ids
// (the cut depends only on the counts, not on N); rank r runs parts r, r + N,
// ... as ordinary generations of that id range (RunGeneration with
// GenerateOptions::first_attempt / end_attempt, jsonl: every attempt, valid
// or not, with its id) with its own local worker processes. The parts' counts
// are summed on every rank; rounds continue until the wanted valid records or
// the invalid budget are reached. Rank 0 then releases the parts' records in
// id order through an AttemptScheduler, exactly as a single process releases
// its workers' results (the same valid records, the same max_invalid stop),
// into the requested output and format.
//
// Parts live in `<output>.parts/` (a directory every rank can write: the
// output's file system must be shared by the ranks), with a `.json` beside
// each finished part. `--resume` keeps the finished parts whose settings
// match and runs the others again (at most one part per rank is lost to a
// kill); without it an old parts directory is replaced. The directory goes
// when the output is complete. Start strings (--start-strings) run on rank 0
// alone.
#pragma once

#include "generate/workers.h"

namespace ds::dist {

Status RunShardedGeneration(const GenerationModel& model, const RunOptions& options,
                            const GenerateEvents& events, GenerateSummary* summary);

}  // namespace ds::dist
