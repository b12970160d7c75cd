//! A release's objects predicted on every core (contiguous chunks, taken by threads as they
//! come free), handed on in input order: the result is the one a single thread gives.

use super::{Fetched, ObjectReport, Options, Target, check_prepared, with_live_origin};
use crate::deadline::{Deadline, Expired};

/// Objects per thread below which a release is predicted on one thread.
const OBJECTS_PER_THREAD: usize = 32;

/// The release's objects predicted against their live objects, handed to `each` in order;
/// many are predicted on every core, stopping when `deadline` passes.
pub(super) fn check_objects(
    targets: &[&Target],
    live: &Fetched,
    opts: &Options,
    deadline: &Deadline,
    each: &mut dyn FnMut(ObjectReport) -> Result<(), Expired>,
) -> Result<(), Expired> {
    let one = |t: &Target| {
        // Evaluation deep in the engine (CEL rules) asks the thread's deadline between steps.
        let _deadline = deadline.enter();
        let info = &t.info;
        let prepared = live
            .prepare(
                &t.object_ref,
                &info.schema,
                &info.type_ref,
                &info.gvk.api_version(),
            )
            .and_then(Result::ok);
        let o = check_prepared(t, live.get(&t.object_ref), prepared.as_deref(), opts);
        with_live_origin(o, live, t)
    };
    let threads = crate::cores::cores().min(targets.len() / OBJECTS_PER_THREAD);
    if threads < 2 {
        for t in targets {
            each(one(t))?;
        }
        return Ok(());
    }
    let len = crate::cores::chunk_len(targets.len());
    let done = crate::cores::map_chunks(targets, len, threads, |run| {
        run.iter()
            .map_while(|t| (!deadline.expired()).then(|| one(t)))
            .collect::<Vec<_>>()
    });
    // In order, up to the first chunk the deadline cut short (chunks after it may have started
    // before it passed).
    for (objects, run) in done.into_iter().zip(targets.chunks(len)) {
        let objects = objects.unwrap_or_else(|p| std::panic::resume_unwind(p));
        let whole = objects.len() == run.len();
        for o in objects {
            each(o)?;
        }
        if !whole {
            break;
        }
    }
    deadline.check()
}
