//! Unit tests of `report_cli`.

use super::*;
use quarry_engine::research::machine::state::{Mode, RunInput, RunState};
use quarry_engine::research::shell::executor::encode_checkpoint;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quarry-report-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test]
async fn a_standalone_report_is_printed_from_its_state_directory() {
    let d = dir("done");
    let store = LocalStore::new(&d);
    store.put(REPORT_KEY, b"# Report\n").await.unwrap();
    assert_eq!(standalone_report(&d).await.unwrap(), "# Report\n");
    // A path given as the name is a state directory too.
    let args = ReportArgs {
        name: Some(d.display().to_string()),
        namespace: None,
        state_dir: None,
    };
    assert_eq!(report(&args).await.unwrap(), "# Report\n");
    let _ = std::fs::remove_dir_all(d);
}

#[tokio::test]
async fn an_unfinished_or_empty_state_directory_says_what_it_holds() {
    let d = dir("running");
    let store = LocalStore::new(&d);
    let mut state = RunState::new(RunInput::new("what is CEL?", Mode::Quick));
    state.phase = quarry_engine::research::machine::state::Phase::Researching;
    store
        .put(
            quarry_engine::store::keys::CHECKPOINT_KEY,
            &encode_checkpoint(&state).unwrap(),
        )
        .await
        .unwrap();
    let text = standalone_report(&d).await.unwrap_err().to_string();
    assert!(
        text.contains("(\"what is CEL?\") is Researching with no report yet")
            && text.contains("--state-dir"),
        "{text}"
    );
    let empty = dir("empty");
    let text = standalone_report(&empty).await.unwrap_err().to_string();
    assert!(text.contains("holds no Quarry run"), "{text}");
    let _ = std::fs::remove_dir_all(d);
}

#[tokio::test]
async fn cluster_errors_name_the_run_and_its_phase() {
    use http::{Request, Response};
    use kube::client::Body;
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "team");
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(
            req.uri().path(),
            "/apis/quarry.dev/v1alpha1/namespaces/team/researchruns/missing"
        );
        let status = serde_json::json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"});
        send.send_response(
            Response::builder()
                .status(404)
                .body(Body::from(serde_json::to_vec(&status).unwrap()))
                .unwrap(),
        );
        let (_, send) = handle.next_request().await.unwrap();
        let run = serde_json::json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"name": "busy", "namespace": "team"},
            "spec": {"query": "what is CEL?"},
            "status": {"phase": "Researching", "progress": "40%"}
        });
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&run).unwrap()))
                .unwrap(),
        );
    });
    // The client's default namespace is used when none is given.
    let e = cluster_report(&client, None, "missing").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "ResearchRun \"missing\" not found in namespace \"team\"; list the runs with: kubectl get researchruns -n team"
    );
    let e = cluster_report(&client, Some("team"), "busy")
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ResearchRun team/busy is still Researching (40%); its report is stored when it completes (watch it with: kubectl get researchrun busy -n team -w)"
    );
    server.await.unwrap();
}
