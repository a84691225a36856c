//! The vector side of knowledge search: each base's chunk vectors kept in this process's
//! memory, and an exact scan over the bases a search names.
//!
//! A base's chunks change only a file at a time (indexed, failed or deleted), and each change
//! counts up the base's `index_version` in its transaction. A search reads the versions of its
//! bases (one small query, scoped by tenant, so another tenant's base is never served) and
//! reloads a base whose version differs from the one it holds: every instance sees every
//! change at its next search, and a base that does not change is read from the database once.
//! The cache is bounded by the values it holds; the bases searched longest ago go first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentry_domain::ids::ChunkId;
use agentry_domain::knowledge::ChunkScope;
use agentry_domain::memory::dot;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::KnowledgeStore;
use crate::memory::vector_from_bytes;
use crate::schema::{knowledge_bases, knowledge_chunks};

/// Values (f32) the cache holds by default: 64 Mi values, 256 MiB — 170,000 chunks of a
/// 384-dimension model.
pub(super) const DEFAULT_CACHE_FLOATS: usize = 64 * 1024 * 1024;

/// One base's vectors, as loaded at `version` for `model`.
#[derive(Debug)]
struct BaseVectors {
    version: i64,
    model: String,
    ids: Vec<ChunkId>,
    files: Vec<String>,
    dimension: usize,
    /// Every vector, one after the other.
    values: Vec<f32>,
}

#[derive(Debug, Default)]
struct Cached {
    bases: HashMap<String, (Arc<BaseVectors>, u64)>,
    floats: usize,
    tick: u64,
}

/// The bases' vectors of this process.
#[derive(Debug)]
pub(super) struct BaseVectorCache {
    capacity: usize,
    cached: Mutex<Cached>,
}

impl BaseVectorCache {
    pub(super) fn new(capacity: usize) -> Self {
        Self { capacity, cached: Mutex::new(Cached::default()) }
    }

    fn get(&self, base: &str, version: i64, model: &str) -> Option<Arc<BaseVectors>> {
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        cached.tick += 1;
        let tick = cached.tick;
        let (vectors, used) = cached.bases.get_mut(base)?;
        if vectors.version != version || vectors.model != model {
            return None;
        }
        *used = tick;
        Some(vectors.clone())
    }

    fn put(&self, base: String, vectors: Arc<BaseVectors>) {
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        cached.tick += 1;
        let tick = cached.tick;
        let size = vectors.values.len();
        if let Some((old, _)) = cached.bases.insert(base, (vectors, tick)) {
            cached.floats -= old.values.len();
        }
        cached.floats += size;
        while cached.floats > self.capacity && cached.bases.len() > 1 {
            let Some(oldest) =
                cached.bases.iter().min_by_key(|(_, (_, used))| *used).map(|(id, _)| id.clone())
            else {
                break;
            };
            if let Some((gone, _)) = cached.bases.remove(&oldest) {
                cached.floats -= gone.values.len();
            }
        }
    }

    fn forget(&self, bases: &[String]) {
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        for base in bases {
            if let Some((gone, _)) = cached.bases.remove(base) {
                cached.floats -= gone.values.len();
            }
        }
    }
}

impl KnowledgeStore {
    /// The `limit` chunks of `scope` nearest to `query`, exactly (see the module).
    pub(super) async fn nearest_chunks(
        &self,
        scope: &ChunkScope,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> anyhow::Result<Vec<(ChunkId, f32)>> {
        let tenant = scope.tenant.to_string();
        let wanted: Vec<String> = scope.bases.iter().map(ToString::to_string).collect();
        let versions: Vec<(String, i64)> = with_conn!(self.db, conn => knowledge_bases::table
            .filter(knowledge_bases::tenant_id.eq(&tenant))
            .filter(knowledge_bases::id.eq_any(&wanted))
            .select((knowledge_bases::id, knowledge_bases::index_version))
            .load(conn)
            .await)?;
        let gone: Vec<String> =
            wanted.iter().filter(|b| !versions.iter().any(|(id, _)| id == *b)).cloned().collect();
        self.vectors.forget(&gone);
        let mut bases = Vec::with_capacity(versions.len());
        for (base, version) in versions {
            let vectors = match self.vectors.get(&base, version, model) {
                Some(v) => v,
                None => {
                    let loaded = Arc::new(self.load_base(&tenant, &base, version, model).await?);
                    self.vectors.put(base, loaded.clone());
                    loaded
                }
            };
            bases.push(vectors);
        }
        let files: Vec<String> = scope.files.iter().map(ToString::to_string).collect();
        let mut hits: Vec<(f32, &ChunkId)> = Vec::new();
        for base in &bases {
            if base.dimension != query.len() {
                continue;
            }
            for (i, vector) in base.values.chunks_exact(base.dimension).enumerate() {
                if !files.is_empty() && !files.contains(&base.files[i]) {
                    continue;
                }
                hits.push((dot(query, vector), &base.ids[i]));
            }
        }
        let limit = limit.min(hits.len());
        if limit == 0 {
            return Ok(Vec::new());
        }
        let by_similarity = |a: &(f32, &ChunkId), b: &(f32, &ChunkId)| {
            b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.1.cmp(b.1))
        };
        hits.select_nth_unstable_by(limit - 1, by_similarity);
        hits.truncate(limit);
        hits.sort_by(by_similarity);
        Ok(hits.into_iter().map(|(s, id)| (id.clone(), s)).collect())
    }

    async fn load_base(
        &self,
        tenant: &str,
        base: &str,
        version: i64,
        model: &str,
    ) -> anyhow::Result<BaseVectors> {
        let rows: Vec<(String, String, Vec<u8>)> = with_conn!(self.db, conn => knowledge_chunks::table
            .filter(knowledge_chunks::tenant_id.eq(tenant))
            .filter(knowledge_chunks::knowledge_base_id.eq(base))
            .filter(knowledge_chunks::embedding_model.eq(model))
            .order(knowledge_chunks::id.asc())
            .select((knowledge_chunks::id, knowledge_chunks::file_id, knowledge_chunks::embedding))
            .load(conn)
            .await)?;
        let dimension = <[_]>::first(&rows).map_or(0, |(_, _, e): &(String, String, Vec<u8>)| e.len() / 4);
        let mut vectors = BaseVectors {
            version,
            model: model.to_owned(),
            ids: Vec::with_capacity(rows.len()),
            files: Vec::with_capacity(rows.len()),
            dimension,
            values: Vec::with_capacity(rows.len() * dimension),
        };
        for (id, file, embedding) in rows {
            let vector = vector_from_bytes(&embedding);
            if vector.len() != dimension {
                continue;
            }
            vectors.ids.push(ChunkId::from_string(id));
            vectors.files.push(file);
            vectors.values.extend_from_slice(&vector);
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(version: i64, n: usize) -> Arc<BaseVectors> {
        Arc::new(BaseVectors {
            version,
            model: "m".into(),
            ids: (0..n).map(|i| ChunkId::from_string(format!("kbc_{i}"))).collect(),
            files: vec!["kbf_1".into(); n],
            dimension: 2,
            values: vec![1.0; n * 2],
        })
    }

    #[test]
    fn a_base_is_served_only_at_its_version_and_model() {
        let cache = BaseVectorCache::new(100);
        cache.put("kb_1".into(), base(3, 2));
        assert!(cache.get("kb_1", 3, "m").is_some());
        assert!(cache.get("kb_1", 4, "m").is_none(), "changed since");
        assert!(cache.get("kb_1", 3, "other").is_none(), "another model");
        cache.forget(&["kb_1".into()]);
        assert!(cache.get("kb_1", 3, "m").is_none());
    }

    #[test]
    fn past_its_capacity_the_base_searched_longest_ago_goes() {
        let cache = BaseVectorCache::new(10);
        cache.put("kb_1".into(), base(1, 2));
        cache.put("kb_2".into(), base(1, 2));
        assert!(cache.get("kb_1", 1, "m").is_some());
        cache.put("kb_3".into(), base(1, 2));
        assert!(cache.get("kb_2", 1, "m").is_none(), "least recently used");
        assert!(cache.get("kb_1", 1, "m").is_some());
        assert!(cache.get("kb_3", 1, "m").is_some());
    }
}
