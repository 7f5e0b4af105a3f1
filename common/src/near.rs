//! Finding the next item of a feed among items kept in the order the feed first named them:
//! a feed (a TSBS file, a client's batches, a line-protocol body) names its devices in much
//! the same order every interval, so the next one is usually just after the last one found,
//! in memory order, where a probe of a map of 100,000s was a cache miss. The caller keeps a
//! compact array to scan (hashes of the names, say), checks a hit against the item itself and
//! probes its own index otherwise.

/// The index of the item `is` picks among the `ahead` after `last` (first match), else the
/// `behind` before it (nearest first); `None` if neither holds it (the caller then probes its
/// index). `last` may be `usize::MAX` (none yet).
pub fn position_near<T>(
    items: &[T],
    last: usize,
    ahead: usize,
    behind: usize,
    is: impl Fn(&T) -> bool,
) -> Option<usize> {
    let from = last.wrapping_add(1);
    let after = items.get(from..).unwrap_or(&[]);
    let after = after.get(..ahead).unwrap_or(after);
    if let Some(d) = first_match(after, &is) {
        return Some(from + d);
    }
    let lo = last.saturating_sub(behind);
    let before = items.get(lo..last).unwrap_or(&[]);
    last_match(before, &is).map(|d| lo + d)
}

/// `items.iter().position(is)`, four items at a time with no branch between them: the
/// compiler tests the four side by side (SIMD compares for `u64` keys), so a window the
/// item is not in costs a quarter of the branches. A window of [`NearCursor::AHEAD`] keys is
/// scanned for most lines of a line-protocol body.
#[inline]
fn first_match<T>(items: &[T], is: &impl Fn(&T) -> bool) -> Option<usize> {
    let mut fours = items.chunks_exact(4);
    let mut base = 0usize;
    for four in &mut fours {
        if let [a, b, c, d] = four {
            if let Some(i) = pick_of_four([a, b, c, d], is) {
                return Some(base + i);
            }
        }
        base += 4;
    }
    fours.remainder().iter().position(is).map(|i| base + i)
}

/// `items.iter().rposition(is)`, four items at a time as [`first_match`] does.
#[inline]
fn last_match<T>(items: &[T], is: &impl Fn(&T) -> bool) -> Option<usize> {
    let mut fours = items.rchunks_exact(4);
    let mut end = items.len();
    for four in &mut fours {
        end -= 4;
        if let [a, b, c, d] = four {
            if let Some(i) = pick_of_four([d, c, b, a], is) {
                return Some(end + 3 - i);
            }
        }
    }
    fours.remainder().iter().rposition(is)
}

/// The first of `four` that `is` picks, after one test of all four without a branch.
#[inline(always)]
fn pick_of_four<T>(four: [&T; 4], is: &impl Fn(&T) -> bool) -> Option<usize> {
    let [a, b, c, d] = four;
    if !(is(a) | is(b) | is(c) | is(d)) {
        return None;
    }
    four.iter().position(|x| is(x))
}

/// Asks the CPU to bring `items[i]` into cache (nothing if `i` is out of range), for an item
/// the caller will most likely look at next: the one after the item of a feed just found.
/// With 100,000s of devices the items are megabytes, touched once an interval each, so every
/// lookup's check of its item waited on memory; the prefetch overlaps that wait with the work
/// done before the next lookup (parsing the next line, say).
#[inline]
pub fn prefetch<T>(items: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = items.get(i) {
        // SAFETY: a prefetch is a hint that never faults and reads nothing into the program;
        // the pointer is to an element of a live slice.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (item as *const T).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, i);
}

/// Where [`position_near`] looks first for the next item of a feed: after each of the last
/// [`NearCursor::WAYS`] places a run of the feed was found at, the most recent first. A feed
/// is several runs interleaved: TSBS's late points come up to 100s of lines after their
/// turn, a data node's batch takes turns between the blocks of several loader workers, and
/// the subtables created by one interval's late rows sit apart from the rest. Each run keeps
/// its own place, so going back to a run costs no probe; only a run not among the last few
/// (a late item, a jump to another part of the feed) costs one, and its place then replaces
/// the least recently used. With one place kept, two interleaved runs cost a probe every
/// other switch (one in eight lookups of a data node at 100,000 trucks).
#[derive(Clone, Copy, Debug)]
pub struct NearCursor {
    /// Places, most recently used first; `usize::MAX` is none (the first is then the start).
    places: [usize; NearCursor::WAYS],
}

impl Default for NearCursor {
    fn default() -> Self {
        NearCursor {
            places: [usize::MAX; NearCursor::WAYS],
        }
    }
}

impl NearCursor {
    /// Runs followed at once.
    pub const WAYS: usize = 4;
    /// Items looked at after a place, and before it ([`position_near`]'s `ahead` and
    /// `behind`), for a feed whose order moves items a few dozen places between intervals
    /// (TSBS's generator holds points and batches of points back and emits them later). In
    /// the frontend's series lookups at 100,000 trucks, with 32 ahead and 8 behind, a
    /// line's series was 9 to 64 entries before its run's place for one line in twenty;
    /// with 64 behind, 33 to 64 after it for one in 85; each a probe of a map of 200,000
    /// (two cache misses). With 64 each way, probes other than for new items fell from
    /// about one line in twelve to one in 400, and a window scanned in vain costs 128
    /// compares of 8-byte keys, less than one of those misses.
    pub const AHEAD: usize = 64;
    pub const BEHIND: usize = 64;

    /// The index of the item `is` picks: near one of the places if it is there (`ahead`
    /// after and `behind` before it), else `probe()`'s answer.
    pub fn find<T>(
        &mut self,
        items: &[T],
        ahead: usize,
        behind: usize,
        is: impl Fn(&T) -> bool,
        probe: impl FnOnce() -> Option<usize>,
    ) -> Option<usize> {
        for k in 0..Self::WAYS {
            let place = self.places[k];
            if place == usize::MAX && k > 0 {
                break;
            }
            if let Some(i) = position_near(items, place, ahead, behind, &is) {
                self.move_to_front(k, i);
                return Some(i);
            }
        }
        let i = probe()?;
        self.at(i);
        Some(i)
    }

    /// [`NearCursor::find`] over a compact form of the items (a hash of each) that another
    /// item may share: a hit near a place counts only when `is_item(i)` confirms it, else
    /// `probe()` answers and the cursor moves to its answer.
    pub fn find_checked<T>(
        &mut self,
        items: &[T],
        ahead: usize,
        behind: usize,
        is: impl Fn(&T) -> bool,
        is_item: impl Fn(usize) -> bool,
        probe: impl Fn() -> Option<usize>,
    ) -> Option<usize> {
        match self.find(items, ahead, behind, is, &probe)? {
            i if is_item(i) => Some(i),
            _ => {
                let i = probe()?;
                self.at(i);
                Some(i)
            }
        }
    }

    /// [`NearCursor::find_checked`] over a 64-bit hash of each item (`hashes`), looking for
    /// `h` within [`NearCursor::AHEAD`] and [`NearCursor::BEHIND`] of each place: the form
    /// the write path's indexes of names and series keys all take.
    pub fn find_hash(
        &mut self,
        hashes: &[u64],
        h: u64,
        is_item: impl Fn(usize) -> bool,
        probe: impl Fn() -> Option<usize>,
    ) -> Option<usize> {
        self.find_checked(
            hashes,
            Self::AHEAD,
            Self::BEHIND,
            |&x| x == h,
            is_item,
            probe,
        )
    }

    /// Place `k` moves to `i` and becomes the most recent.
    #[inline]
    fn move_to_front(&mut self, k: usize, i: usize) {
        if k == 0 {
            // The usual case: the run found was the last one used.
            self.places[0] = i;
            return;
        }
        if let Some(moved) = self.places.get_mut(..=k) {
            moved.rotate_right(1);
        }
        self.places[0] = i;
    }

    /// Item `i` was just added or found otherwise: a new place, replacing the least recently
    /// used.
    pub fn at(&mut self, i: usize) {
        self.move_to_front(Self::WAYS - 1, i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefetch past the end (the last item found, or an empty slice) is no access at all.
    #[test]
    fn prefetch_past_the_end_is_nothing() {
        let v: Vec<[u8; 64]> = vec![[1; 64]; 3];
        for i in [0, 2, 3, usize::MAX] {
            prefetch(&v, i);
        }
        prefetch::<u64>(&[], 0);
        assert_eq!(v[2], [1; 64]);
    }

    /// Four at a time finds what one at a time finds: the first match and the last, with
    /// none, one or several in the slice, for every length around the group of four.
    #[test]
    fn matches_four_at_a_time_are_the_ones_one_at_a_time_finds() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in 0..24usize {
            for _ in 0..200 {
                let items: Vec<u64> = (0..len).map(|_| next() % 6).collect();
                let x = next() % 6;
                let is = |v: &u64| *v == x;
                assert_eq!(
                    first_match(&items, &is),
                    items.iter().position(is),
                    "{items:?} {x}"
                );
                assert_eq!(
                    last_match(&items, &is),
                    items.iter().rposition(is),
                    "{items:?} {x}"
                );
            }
        }
    }

    /// The cursor finds every item in any order, probing only for what is not near: a late
    /// item costs one probe and no more, a jump to another part costs one probe, and going
    /// back to a run among the last few costs none.
    #[test]
    fn the_near_cursor_probes_once_per_late_item_or_new_run() {
        let items: Vec<u32> = (0..1000).collect();
        let run = |order: &[u32]| -> usize {
            let mut cursor = NearCursor::default();
            let mut probes = 0;
            for &x in order {
                let got = cursor.find(
                    &items,
                    8,
                    8,
                    |&i| i == x,
                    || {
                        probes += 1;
                        items.iter().position(|&i| i == x)
                    },
                );
                assert_eq!(got, Some(x as usize));
            }
            probes
        };
        let in_order: Vec<u32> = (0..1000).collect();
        assert_eq!(run(&in_order), 0);
        // Every 50th item comes 40 places late: a probe for it, none for the next.
        let mut late: Vec<u32> = (0..1000).filter(|i| i % 50 != 5).collect();
        for k in (0..20).rev() {
            let at = late.iter().position(|&i| i == 50 * k + 45).expect("there");
            late.insert(at, 50 * k + 5);
        }
        assert_eq!(run(&late), 20);
        // Two runs far apart, taken in turns of 100: a probe for the second run's start only.
        let jumps: Vec<u32> = (0..5)
            .flat_map(|t| (t * 100..t * 100 + 100).chain(500 + t * 100..600 + t * 100))
            .collect();
        assert_eq!(run(&jumps), 1);
        // Four runs, an item of each in turn: a probe for each run's start but the first.
        let four: Vec<u32> = (0..250)
            .flat_map(|i| [i, 250 + i, 500 + i, 750 + i])
            .collect();
        assert_eq!(run(&four), 3);
        // Five runs in turn are one more than the cursor follows: every item is a probe.
        let five: Vec<u32> = (0..200)
            .flat_map(|i| [i, 200 + i, 400 + i, 600 + i, 800 + i])
            .collect();
        assert_eq!(run(&five), 1000 - 1);
        // Not there: the probe's answer.
        let mut cursor = NearCursor::default();
        assert_eq!(cursor.find(&items, 8, 8, |&i| i == 5000, || None), None);
    }

    /// The windows chosen ([`NearCursor::AHEAD`], [`NearCursor::BEHIND`]) follow a feed
    /// perturbed as TSBS's IoT generator does it (../shared/tsbs-iot.md: batches and points
    /// dropped, held back and emitted later), each interval naming the devices in their
    /// first order otherwise: windows of 32 ahead and 8 behind probe for about one lookup in
    /// 120 here (732 of 89,678), the chosen ones for about one in 6,000 (15). (The
    /// benchmark's own file moves its lines further: in the frontend at 100,000 trucks the
    /// old windows probed for one line in twelve, the chosen ones for one in 400.)
    #[test]
    fn the_windows_follow_a_tsbs_like_feed_with_few_probes() {
        let devices = 20_000u32;
        let items: Vec<u32> = (0..devices).collect();
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut chance = move |p: f64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 11) as f64) / ((1u64 << 53) as f64) < p
        };
        // Batches of 10 points: 1% dropped whole, 5% held back whole; a batch slot emits the
        // oldest held batch first half of the time. Then per point: 10% dropped, 30% held
        // back, a point slot emitting the oldest held point first half of the time.
        let mut feed = Vec::new();
        let mut held_points = std::collections::VecDeque::new();
        let mut held_batches: std::collections::VecDeque<Vec<u32>> = Default::default();
        for _interval in 0..5 {
            for first in (0..devices).step_by(10) {
                let batch: Vec<u32> = (first..(first + 10).min(devices)).collect();
                if !held_batches.is_empty() && chance(0.5) {
                    feed.extend(held_batches.pop_front().unwrap_or_default());
                }
                if chance(0.01) {
                    continue;
                }
                if chance(0.05) {
                    held_batches.push_back(batch);
                    continue;
                }
                for d in batch {
                    if !held_points.is_empty() && chance(0.5) {
                        feed.extend(held_points.pop_front());
                    }
                    if chance(0.1) {
                        continue;
                    }
                    if chance(0.3) {
                        held_points.push_back(d);
                    } else {
                        feed.push(d);
                    }
                }
            }
        }
        feed.extend(held_points);
        feed.extend(held_batches.into_iter().flatten());
        let probes = |ahead: usize, behind: usize| {
            let mut cursor = NearCursor::default();
            let mut probes = 0usize;
            for &x in &feed {
                let got = cursor.find(
                    &items,
                    ahead,
                    behind,
                    |&i| i == x,
                    || {
                        probes += 1;
                        Some(x as usize)
                    },
                );
                assert_eq!(got, Some(x as usize));
            }
            probes
        };
        let (old, chosen) = (probes(32, 8), probes(NearCursor::AHEAD, NearCursor::BEHIND));
        assert!(
            old > 20 * chosen,
            "{old} probes with (32, 8), {chosen} with the chosen"
        );
        assert!(
            chosen * 1000 < feed.len(),
            "{chosen} probes of {}",
            feed.len()
        );
    }
}
