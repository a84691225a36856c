//! The in-process cache of memory vectors, one per tenant, so that a search compares the
//! query with every vector of its scope without reading a single blob from the database.
//!
//! Correctness across instances rests on the tenant's memory version (`memory_scopes`),
//! advanced in the transaction of every change: before each use the cache reads the version
//! (one indexed row) and, when it moved, loads only what changed since (rows whose `seq` is
//! newer, and tombstones of deleted ones), or everything after a bulk change.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use agentry_domain::ids::MemoryId;
use agentry_domain::memory::{Facets, MemoryFilter};
use chrono::{DateTime, Utc};

/// One cached vector with what the scan filters on.
#[derive(Debug, Clone)]
pub(crate) struct CachedVector {
    pub(crate) id: MemoryId,
    pub(crate) facets: Facets,
    pub(crate) vector: Vec<f32>,
}

/// The vectors of one agent (or of the tenant-wide entries): contiguous, so a scan streams
/// through memory. Each vector is kept twice: exact (`f32`) and quantised to `i8` with a scale
/// per vector. A scan compares the query with the `i8` copies — a quarter of the memory to
/// read, and a scan is bound by memory bandwidth — and computes the exact similarity only for
/// the best few of them ([`rescored`]).
#[derive(Debug, Default)]
struct Group {
    ids: Vec<MemoryId>,
    facets: Vec<Facets>,
    vectors: Vec<f32>,
    quantized: Vec<i8>,
    scales: Vec<f32>,
}

/// How many first-pass candidates are rescored exactly for a search that wants `limit`: four
/// times as many, and at least 64. The `i8` error of a unit vector's similarity is about 1e-3,
/// far below the gaps between the hundreds of places this margin spans.
pub(crate) fn rescored(limit: usize) -> usize {
    limit.saturating_mul(4).max(64)
}

/// A vector quantised to `i8` (`x ≈ scale · q`), with its scale: the largest component maps
/// to ±127.
fn quantize(vector: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        out.extend(std::iter::repeat_n(0, vector.len()));
        return 0.0;
    }
    let scale = max / 127.0;
    // In range by construction: |x / scale| <= 127.
    #[allow(clippy::cast_possible_truncation)]
    out.extend(vector.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8));
    scale
}

/// A tenant's cached vectors of one model, as of `version`.
#[derive(Debug)]
pub(crate) struct TenantVectors {
    version: i64,
    model_id: String,
    dimension: usize,
    groups: HashMap<Option<String>, Group>,
    /// Where each id is: its group and index.
    index: HashMap<MemoryId, (Option<String>, usize)>,
}

/// What a sync must load, decided from the cached and the stored version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sync {
    /// The cache is current.
    Current,
    /// Load rows and tombstones newer than `since`.
    Changes { since: i64 },
    /// Load everything.
    Everything,
}

impl TenantVectors {
    fn empty(model_id: &str, dimension: usize) -> Self {
        Self {
            version: -1,
            model_id: model_id.to_owned(),
            dimension,
            groups: HashMap::new(),
            index: HashMap::new(),
        }
    }

    fn remove(&mut self, id: &MemoryId) {
        let Some((group_key, i)) = self.index.remove(id) else { return };
        let Some(group) = self.groups.get_mut(&group_key) else { return };
        let last = group.ids.len() - 1;
        group.ids.swap_remove(i);
        group.facets.swap_remove(i);
        group.scales.swap_remove(i);
        let d = self.dimension;
        if i != last {
            group.vectors.copy_within(last * d..(last + 1) * d, i * d);
            group.quantized.copy_within(last * d..(last + 1) * d, i * d);
            if let Some(slot) = self.index.get_mut(&group.ids[i]) {
                slot.1 = i;
            }
        }
        group.vectors.truncate(last * d);
        group.quantized.truncate(last * d);
    }

    fn put(&mut self, v: CachedVector) {
        if v.vector.len() != self.dimension {
            // Another model's size: not comparable with this model's queries.
            return;
        }
        self.remove(&v.id);
        let key = v.facets.agent_id.as_ref().map(|a| a.as_str().to_owned());
        let group = self.groups.entry(key.clone()).or_default();
        self.index.insert(v.id.clone(), (key, group.ids.len()));
        group.ids.push(v.id);
        group.facets.push(v.facets);
        let scale = quantize(&v.vector, &mut group.quantized);
        group.scales.push(scale);
        group.vectors.extend_from_slice(&v.vector);
    }

    fn groups<'a>(&'a self, filter: &MemoryFilter) -> Box<dyn Iterator<Item = &'a Group> + 'a> {
        match &filter.agent_id {
            Some(agent) => Box::new(self.groups.get(&Some(agent.as_str().to_owned())).into_iter()),
            None => Box::new(self.groups.values()),
        }
    }

    /// How many vectors a scan for `filter` compares at most.
    pub(crate) fn scope_size(&self, filter: &MemoryFilter) -> usize {
        self.groups(filter).map(|g| g.ids.len()).sum()
    }

    /// The `limit` vectors passing `filter` nearest to `query`, best first. A group of
    /// [`PARALLEL_FROM`] vectors or more is scanned in parts on as many threads as there are
    /// cores: the scan is bound by memory bandwidth and one core does not use all of it.
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        filter: &MemoryFilter,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Vec<(MemoryId, f32)> {
        if query.len() != self.dimension || limit == 0 {
            return Vec::new();
        }
        let mut query_q = Vec::with_capacity(query.len());
        let query_scale = quantize(query, &mut query_q);
        let first_pass = rescored(limit);
        let scan =
            Scan { query: &query_q, query_scale, filter, now, limit: first_pass, dimension: self.dimension };
        let parts = std::thread::available_parallelism().map_or(1, usize::from).min(4);
        let mut best: Vec<(Hit<'_>, &[f32])> = Vec::new();
        for group in self.groups(filter) {
            let n = group.ids.len();
            if parts > 1 && n >= PARALLEL_FROM {
                let chunk = n.div_ceil(parts);
                let found: Vec<Vec<(Hit<'_>, &[f32])>> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..parts)
                        .map(|p| {
                            let range = (p * chunk).min(n)..((p + 1) * chunk).min(n);
                            let scan = &scan;
                            s.spawn(move || scan.run(group, range))
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
                });
                best.extend(found.into_iter().flatten());
            } else {
                best.extend(scan.run(group, 0..n));
            }
        }
        // Exact similarities for the first pass's best.
        let mut exact: Vec<Hit<'_>> =
            best.into_iter().map(|(hit, vector)| Hit { score: dot(query, vector), ..hit }).collect();
        exact.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.as_str().cmp(b.id.as_str())));
        exact.truncate(limit);
        exact.into_iter().map(|h| (h.id.clone(), h.score)).collect()
    }

    /// How many vectors pass `filter`.
    pub(crate) fn count(&self, filter: &MemoryFilter, now: DateTime<Utc>) -> usize {
        self.groups(filter).map(|g| g.facets.iter().filter(|f| filter.matches(f, now)).count()).sum()
    }
}

/// Groups at least this large are scanned on several threads.
pub(crate) const PARALLEL_FROM: usize = 20_000;

/// One first-pass vector search (over the `i8` copies) over part of a group.
struct Scan<'q> {
    query: &'q [i8],
    query_scale: f32,
    filter: &'q MemoryFilter,
    now: DateTime<Utc>,
    limit: usize,
    dimension: usize,
}

impl Scan<'_> {
    /// The best `limit` of `group`'s vectors in `range` by approximate similarity, unordered,
    /// each with its exact vector.
    fn run<'g>(&self, group: &'g Group, range: std::ops::Range<usize>) -> Vec<(Hit<'g>, &'g [f32])> {
        let f = self.filter;
        let unfiltered =
            f.memory_types.is_empty() && f.tags.is_empty() && f.metadata.is_empty() && f.current_only();
        let d = self.dimension;
        // A min-heap of the best so far: its top is the worst kept.
        let mut best: BinaryHeap<Hit<'g>> = BinaryHeap::with_capacity(self.limit + 1);
        let arch = pulp::Arch::new();
        let mut dots = vec![0i32; SCORED_AT_ONCE.min(range.len())];
        let mut start = range.start;
        while start < range.end {
            let end = range.end.min(start + SCORED_AT_ONCE);
            let dots = &mut dots[..end - start];
            // Every vector of the block, filtered out or not: the filter is the rare case, and
            // the block's loop stays one straight run of vector instructions.
            arch.dispatch(DotsI8 {
                query: self.query,
                vectors: &group.quantized[start * d..end * d],
                out: dots,
            });
            for (i, &dot) in (start..end).zip(dots.iter()) {
                let facets = &group.facets[i];
                // The common case, no filter, no expiry and still valid, skips the checks.
                let passes = (unfiltered && facets.expires_at.is_none() && facets.invalid_at.is_none())
                    || f.matches(facets, self.now);
                if !passes {
                    continue;
                }
                #[allow(clippy::cast_precision_loss)] // |dot| <= 384 · 127², exact in f32's 24 bits
                let score = dot as f32 * group.scales[i] * self.query_scale;
                if best.len() == self.limit {
                    if best.peek().is_some_and(|w| score <= w.score) {
                        continue;
                    }
                    best.pop();
                }
                best.push(Hit { score, id: &group.ids[i], index: i });
            }
            start = end;
        }
        best.into_vec().into_iter().map(|h| (h, &group.vectors[h.index * d..(h.index + 1) * d])).collect()
    }
}

/// Vectors whose `i8` dot products with the query are computed in one go (16 KiB of results).
const SCORED_AT_ONCE: usize = 4096;

/// The `i8` dot products of the query with consecutive vectors, compiled for the widest vector
/// instructions the CPU has, chosen at run time (`pulp`): AVX2 on most x86-64 machines, where
/// the build's baseline, SSE2, widens and multiplies half as many `i8` pairs per instruction.
/// The scan over many entries is where a search spends its time after the query's embedding.
struct DotsI8<'a> {
    query: &'a [i8],
    /// `out.len()` vectors of the query's dimension, one after the other.
    vectors: &'a [i8],
    out: &'a mut [i32],
}

impl pulp::WithSimd for DotsI8<'_> {
    type Output = ();

    // Inlined into `pulp`'s function for the chosen instruction set, so that the loop and the
    // dot product in it are compiled for it.
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let d = self.query.len();
        if d == 0 {
            return;
        }
        for (out, vector) in self.out.iter_mut().zip(self.vectors.chunks_exact(d)) {
            *out = dot_i8(self.query, vector);
        }
    }
}

/// The dot product, written so the compiler vectorises it: eight independent sums.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            sums[k] += x[k] * y[k];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// The dot product of two `i8` vectors, in `i32`: products are widened to `i16` pairs summed
/// into `i32` lanes, which the compiler turns into `pmaddwd` (sixteen independent sums).
/// Inlined into the scan, so that it is compiled with the scan's instructions.
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut sums = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 =
        ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..16 {
            sums[k] += i32::from(i16::from(x[k]) * i16::from(y[k]));
        }
    }
    sums.iter().sum::<i32>() + tail
}

/// A scan result ordered for a min-heap (worst on top).
#[derive(Clone, Copy)]
struct Hit<'a> {
    score: f32,
    id: &'a MemoryId,
    /// Its place in the group.
    index: usize,
}

impl PartialEq for Hit<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Hit<'_> {}
impl PartialOrd for Hit<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Hit<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the lowest score (then the greatest id) is the heap's top.
        other.score.total_cmp(&self.score).then_with(|| self.id.as_str().cmp(other.id.as_str()))
    }
}

/// Every tenant's cached vectors in this process.
#[derive(Debug, Default)]
pub(crate) struct VectorCache {
    tenants: Mutex<HashMap<String, Arc<RwLock<TenantVectors>>>>,
}

impl VectorCache {
    /// The tenant's cache (empty and never loaded the first time).
    pub(crate) fn tenant(
        &self,
        tenant: &str,
        model_id: &str,
        dimension: usize,
    ) -> Arc<RwLock<TenantVectors>> {
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        tenants
            .entry(tenant.to_owned())
            .or_insert_with(|| Arc::new(RwLock::new(TenantVectors::empty(model_id, dimension))))
            .clone()
    }
}

/// What to load for a cache at `cached` when the store is at `version` (`reset` the last bulk
/// change), for `model_id`.
pub(crate) fn plan(cache: &TenantVectors, model_id: &str, version: i64, reset: i64) -> Sync {
    if cache.model_id != model_id || cache.version < 0 || reset > cache.version {
        Sync::Everything
    } else if cache.version >= version {
        Sync::Current
    } else {
        Sync::Changes { since: cache.version }
    }
}

/// The version a cache is at (`-1`: never loaded).
pub(crate) fn version_of(cache: &TenantVectors) -> i64 {
    cache.version
}

/// What a sync read from the database.
#[derive(Debug)]
pub(crate) struct Load {
    /// The cache's version when the load was planned.
    pub(crate) planned_from: i64,
    /// What was loaded.
    pub(crate) sync: Sync,
    /// The stored version read before the rows.
    pub(crate) version: i64,
    /// The model of the rows.
    pub(crate) model_id: String,
    /// Its dimension.
    pub(crate) dimension: usize,
    /// New or changed rows (every row for [`Sync::Everything`]).
    pub(crate) rows: Vec<CachedVector>,
    /// Deleted entries.
    pub(crate) tombstones: Vec<MemoryId>,
}

/// Applies a load: everything (replacing the contents) or the changes since the version the
/// load was planned from. Skipped when another load got there first (the cache moved
/// meanwhile), so that an older view never overwrites a newer one.
pub(crate) fn apply(cache: &mut TenantVectors, load: Load) {
    if cache.version != load.planned_from {
        return;
    }
    match load.sync {
        Sync::Current => {}
        Sync::Everything => {
            *cache = TenantVectors::empty(&load.model_id, load.dimension);
            for row in load.rows {
                cache.put(row);
            }
            cache.version = load.version;
        }
        Sync::Changes { .. } => {
            for id in &load.tombstones {
                cache.remove(id);
            }
            for row in load.rows {
                cache.put(row);
            }
            cache.version = load.version;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use agentry_domain::ids::AgentId;
    use agentry_domain::memory::MemoryType;
    use chrono::TimeZone;
    use serde_json::Map;

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
    }

    fn v(id: &str, agent: &str, vector: Vec<f32>) -> CachedVector {
        CachedVector {
            id: MemoryId::from_string(id),
            facets: Facets {
                agent_id: Some(AgentId::from_string(agent)),
                memory_type: MemoryType::Semantic,
                tags: vec![],
                metadata: Map::new(),
                importance: 0.5,
                updated_at: now(),
                expires_at: None,
                valid_from: now(),
                invalid_at: None,
            },
            vector,
        }
    }

    fn load(
        planned_from: i64,
        sync: Sync,
        version: i64,
        rows: Vec<CachedVector>,
        tombstones: Vec<MemoryId>,
    ) -> Load {
        Load { planned_from, sync, version, model_id: "m".into(), dimension: 2, rows, tombstones }
    }

    fn loaded(rows: Vec<CachedVector>) -> TenantVectors {
        let mut c = TenantVectors::empty("m", 2);
        apply(&mut c, load(-1, Sync::Everything, 1, rows, vec![]));
        c
    }

    #[test]
    fn nearest_is_exact_and_scoped() {
        let c = loaded(vec![
            v("mem_a", "agt_1", vec![1.0, 0.0]),
            v("mem_b", "agt_1", vec![0.6, 0.8]),
            v("mem_c", "agt_2", vec![1.0, 0.0]),
        ]);
        let all = c.nearest(&[1.0, 0.0], &MemoryFilter::default(), now(), 10);
        assert_eq!(all.len(), 3);
        assert!((all[2].1 - 0.6).abs() < 1e-6);
        let one = MemoryFilter { agent_id: Some(AgentId::from_string("agt_1")), ..Default::default() };
        let hits = c.nearest(&[0.0, 1.0], &one, now(), 1);
        assert_eq!(hits, vec![(MemoryId::from_string("mem_b"), 0.8)]);
        assert_eq!(c.count(&one, now()), 2);
    }

    #[test]
    fn changes_replace_and_remove_in_place() {
        let mut c = loaded(vec![v("mem_a", "agt_1", vec![1.0, 0.0]), v("mem_b", "agt_1", vec![0.0, 1.0])]);
        assert_eq!(plan(&c, "m", 3, 0), Sync::Changes { since: 1 });
        apply(
            &mut c,
            load(
                1,
                Sync::Changes { since: 1 },
                3,
                vec![v("mem_b", "agt_1", vec![1.0, 0.0])],
                vec![MemoryId::from_string("mem_a")],
            ),
        );
        let hits = c.nearest(&[1.0, 0.0], &MemoryFilter::default(), now(), 5);
        assert_eq!(hits, vec![(MemoryId::from_string("mem_b"), 1.0)]);
        assert_eq!(plan(&c, "m", 3, 0), Sync::Current);
        assert_eq!(plan(&c, "m", 4, 4), Sync::Everything, "a bulk change reloads");
        assert_eq!(plan(&c, "other", 3, 0), Sync::Everything, "another model reloads");
    }

    #[test]
    fn a_stale_load_never_overwrites_a_newer_one() {
        let mut c = loaded(vec![v("mem_a", "agt_1", vec![1.0, 0.0])]);
        apply(&mut c, load(1, Sync::Changes { since: 1 }, 5, vec![], vec![MemoryId::from_string("mem_a")]));
        // A load planned from version 1 arrives late with the deleted row.
        apply(
            &mut c,
            load(1, Sync::Changes { since: 1 }, 3, vec![v("mem_a", "agt_1", vec![1.0, 0.0])], vec![]),
        );
        assert!(c.nearest(&[1.0, 0.0], &MemoryFilter::default(), now(), 5).is_empty());
    }

    #[test]
    fn a_large_group_is_scanned_in_parts_with_the_same_answer() {
        let n = PARALLEL_FROM + 7;
        let rows: Vec<CachedVector> = (0..n)
            .map(|i| {
                #[allow(clippy::cast_precision_loss)]
                let a = i as f32 / n as f32;
                v(&format!("mem_{i:06}"), "agt_1", vec![a.cos(), a.sin()])
            })
            .collect();
        let c = loaded(rows);
        let hits = c.nearest(&[0.0, 1.0], &MemoryFilter::default(), now(), 3);
        let ids: Vec<&str> = hits.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(
            ids,
            vec![format!("mem_{:06}", n - 1), format!("mem_{:06}", n - 2), format!("mem_{:06}", n - 3)]
        );
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
    }

    #[test]
    fn the_quantised_first_pass_finds_the_exact_nearest_with_exact_scores() {
        // 384 dimensions as MiniLM's, scattered by xorshift; 3000 vectors, some of them near
        // copies of the query so that the best places are close to each other.
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            #[allow(clippy::cast_precision_loss)]
            let x = (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) % 2001) as f32 / 1000.0 - 1.0;
            x
        };
        let unit = |mut v: Vec<f32>| {
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            v
        };
        let query = unit((0..384).map(|_| next()).collect());
        let rows: Vec<Vec<f32>> = (0..3000)
            .map(|i| {
                let noise: Vec<f32> = (0..384).map(|_| next()).collect();
                let weight = if i % 100 == 0 { 0.05 } else { 1.0 };
                unit(query.iter().zip(&noise).map(|(q, e)| q + weight * e).collect())
            })
            .collect();
        let mut c = TenantVectors::empty("m", 384);
        let cached =
            rows.iter().enumerate().map(|(i, r)| v(&format!("mem_{i:05}"), "agt_1", r.clone())).collect();
        apply(&mut c, Load { dimension: 384, ..load(-1, Sync::Everything, 1, cached, vec![]) });
        let mut exact: Vec<(String, f32)> =
            rows.iter().enumerate().map(|(i, r)| (format!("mem_{i:05}"), dot(&query, r))).collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        let hits = c.nearest(&query, &MemoryFilter::default(), now(), 40);
        assert_eq!(hits.len(), 40);
        for ((id, score), (want_id, want_score)) in hits.iter().zip(&exact) {
            assert_eq!(id.as_str(), want_id);
            assert!((score - want_score).abs() < 1e-6, "the reported score is the exact one");
        }
    }

    #[test]
    fn quantising_keeps_the_direction() {
        let vector = [0.5f32, -0.25, 0.0, 0.125];
        let mut q = Vec::new();
        let scale = quantize(&vector, &mut q);
        assert_eq!(q, vec![127, -64, 0, 32]);
        assert!((scale - 0.5 / 127.0).abs() < 1e-9);
        let mut zero = Vec::new();
        assert!(quantize(&[0.0, 0.0], &mut zero) == 0.0 && zero == vec![0, 0]);
        assert_eq!(dot_i8(&[1; 33], &[-2; 33]), -66);
    }

    #[test]
    fn dot_matches_the_plain_sum() {
        let a: Vec<f32> = (0..385).map(|i| (i as f32).sin()).collect();
        let b: Vec<f32> = (0..385).map(|i| (i as f32).cos()).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-3);
    }
}
