//! Unit tests of `specialised`.

use super::*;

struct NoAdvisories;

#[async_trait]
impl SecurityLookup for NoAdvisories {
    async fn lookup(&self, _: &SecurityQuery) -> ToolAnswer {
        ToolAnswer::default()
    }
}

#[test]
fn sources_are_narrowed_per_run() {
    let all = SpecialisedSources::new(Some(Arc::new(NoAdvisories)), None);
    assert!(!all.is_empty());
    assert_eq!(
        format!("{all:?}"),
        "SpecialisedSources { security: true, stackexchange: false }"
    );
    assert!(all.only(false, true).is_empty());
}
