//! A release's objects predicted on every core: contiguous runs, one per thread, handed on in
//! input order (the result is the one a single thread gives).

use super::{Fetched, ObjectReport, Options, Target, check_prepared, with_live_origin};
use crate::deadline::{Deadline, Expired};

/// Objects per thread below which a release is predicted on one thread.
const OBJECTS_PER_THREAD: usize = 32;

/// The release's objects predicted against their live objects, handed to `each` in order;
/// many are predicted on every core (contiguous runs, one per thread), stopping when
/// `deadline` passes.
pub(super) fn check_objects(
    targets: &[&Target],
    live: &Fetched,
    opts: &Options,
    deadline: &Deadline,
    each: &mut dyn FnMut(ObjectReport) -> Result<(), Expired>,
) -> Result<(), Expired> {
    let one = |t: &Target| {
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
    let per = targets.len().div_ceil(threads);
    let parts: Vec<Vec<ObjectReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .chunks(per)
            .map(|run| {
                scope.spawn(|| {
                    run.iter()
                        .map_while(|t| (!deadline.expired()).then(|| one(t)))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    for o in parts.into_iter().flatten() {
        each(o)?;
    }
    deadline.check()
}
