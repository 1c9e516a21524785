use super::*;

fn passage(heading: &str, text: &str) -> Numbered {
    Numbered {
        number: 1,
        url: "http://docs/page.html".into(),
        title: "Page".into(),
        heading: heading.into(),
        text: text.into(),
    }
}

#[test]
fn a_sentence_whose_passage_names_no_asked_name_is_off_the_question() {
    let asked = "What is the default value of work_mem in PostgreSQL 15?";
    let port = passage(
        "postgres › Options › -p port",
        "Specifies the TCP/IP port on which the server listens. Defaults to 5432.",
    );
    assert!(off_the_asked_names(
        "The default value of port in PostgreSQL 15 is 5432.",
        &port,
        asked
    ));
    // A passage naming the asked setting bears on it, whatever the sentence names.
    let hash = passage(
        "Memory › hash_mem_multiplier (floating point)",
        "The default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount.",
    );
    assert!(!off_the_asked_names(
        "Hash-based operations use twice the usual base amount.",
        &hash,
        asked
    ));
    // A dotted name is named by its last part; a question naming no code name is not judged.
    let loads = passage("json › json.loads(s)", "Deserialize s to a Python object.");
    assert!(!off_the_asked_names(
        "It deserializes s.",
        &loads,
        "What does json.loads do?"
    ));
    assert!(!off_the_asked_names(
        "The default is 5432.",
        &port,
        "What port does PostgreSQL listen on?"
    ));
    assert!(!off_the_asked_names(
        "The default is 5432.",
        &port,
        "What does functools.partial return, and what port does PostgreSQL listen on?"
    ));
}
