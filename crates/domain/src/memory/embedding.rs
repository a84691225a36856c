//! Embeddings: the model that made them, why making them fails, and the vector arithmetic
//! search and consolidation use. The [`Embedder`](super::Embedder) port that makes them is in
//! `ports`.

/// Which model made an embedding. Stored beside every vector, so that vectors of two models
/// (which are not comparable) are never mixed, and `agentry memory reindex` knows what to redo.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EmbeddingModel {
    /// The adapter: `minilm`, `openai` or `hashing`.
    pub provider: String,
    /// The model's id, stable across restarts, e.g. `minilm:all-MiniLM-L6-v2` or
    /// `openai:text-embedding-3-small`.
    pub id: String,
    /// Length of every vector it makes.
    pub dimension: usize,
}

/// Why embedding failed. `Clone`, because one failed batch fails every caller whose texts it
/// held.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    /// The provider answered with an error or something unreadable.
    #[error("the embedding provider failed: {0}")]
    Upstream(String),
    /// The provider did not answer in time.
    #[error("the embedding provider did not answer in time")]
    Timeout,
    /// The model itself failed (a local model's runtime error).
    #[error("the embedding model failed: {0}")]
    Model(String),
}

/// Scales `v` to unit length in place; a zero vector stays zero.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > f32::EPSILON {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

/// The dot product; the cosine similarity of two unit vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_makes_unit_vectors_and_leaves_zero_alone() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        assert!((v[0] - 0.6).abs() < 1e-6);
        let mut zero = vec![0.0; 3];
        normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 3]);
    }
}
