//! Unit tests of `node`.

use super::*;

#[test]
fn readme_install_commands_are_read_as_a_shell_would() {
    let commands = readme_install_commands().unwrap();
    let helm = readme_command(&commands, &["helm", "install"]).unwrap();
    assert_eq!(
        helm[..6],
        [
            "helm",
            "install",
            "quarry",
            "charts/quarry",
            "-n",
            "quarry-system"
        ]
    );
    assert!(helm.contains(&"image.repository=registry.example.com/quarry".to_owned()));
    let secret = readme_command(&commands, &["kubectl", "create", "secret"]).unwrap();
    assert_eq!(
        secret.last().unwrap(),
        "--from-literal=apiKey=$OPENAI_API_KEY"
    );
    let watch = readme_command(&commands, &["kubectl", "get", "rr"]).unwrap();
    assert_eq!(watch, ["kubectl", "get", "rr", "-w"]);
}
