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

/// A value in the model's own words from another entry's passage is written after the
/// entry's name, unquoted; one from an entry the question names, or naming its own, is not.
#[test]
fn a_sentence_of_another_entry_in_own_words_is_labelled_unquoted() {
    let passage = Numbered {
        number: 1,
        url: "http://docs/runtime-config-connection.html".into(),
        title: "20.3. Connections and Authentication".into(),
        heading: "Connection Settings › superuser_reserved_connections (integer)".into(),
        text: "Determines the number of connection slots that are reserved for superusers.".into(),
    };
    let asked = "How many connection slots does PostgreSQL keep for superusers?";
    assert_eq!(
        with_entry_label(asked, "Superusers get three slots.".into(), &passage),
        "superuser_reserved_connections: Superusers get three slots."
    );
    // A sentence stating no value is not labelled: prose after an entry sits under its heading.
    assert_eq!(
        with_entry_label(asked, "Superusers get their own slots.".into(), &passage),
        "Superusers get their own slots."
    );
    assert_eq!(
        with_entry_label(
            "What is superuser_reserved_connections?",
            "Superusers get three slots.".into(),
            &passage
        ),
        "Superusers get three slots."
    );
    assert_eq!(
        with_entry_label(
            asked,
            "superuser_reserved_connections keeps three slots.".into(),
            &passage
        ),
        "superuser_reserved_connections keeps three slots."
    );
    assert_eq!(
        with_entry_label("", "Superusers get three slots.".into(), &passage),
        "Superusers get three slots."
    );
    // The question's own number is no value: "PostgreSQL 15 waits indefinitely ..." from a
    // deadlock_timeout passage (the demo, my own question) is not that setting's.
    let deadlock = Numbered {
        heading: "20.12. Lock Management › deadlock_timeout (integer)".into(),
        ..passage.clone()
    };
    let asked =
        "How long does PostgreSQL 15 wait on a lock by default before checking for a deadlock?";
    assert_eq!(
        with_entry_label(
            asked,
            "PostgreSQL 15 waits for conflicting locks.".into(),
            &deadlock
        ),
        "PostgreSQL 15 waits for conflicting locks."
    );
    assert_eq!(
        with_entry_label(asked, "PostgreSQL 15 waits 1 second.".into(), &deadlock),
        "deadlock_timeout: PostgreSQL 15 waits 1 second."
    );
}
