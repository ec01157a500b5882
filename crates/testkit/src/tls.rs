//! Test certificates for the TLS servers (Redis, MariaDB, PostgreSQL),
//! made with `openssl` from Debian's package.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::{find_bin, make_dir, run_cmd, SBIN_DIRS};

/// A CA (`ca.pem`) and a server certificate it signed for `localhost` and
/// 127.0.0.1 (`server.pem`, `server.key`) in `dir` (made if missing),
/// readable by the server user.
pub fn make_certificates(dir: &Path) -> Result<(), String> {
    let openssl = find_bin("openssl", SBIN_DIRS)?;
    make_dir(dir, None, 0o755)?;
    let ext = dir.join("server.ext");
    fs::write(
        &ext,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| format!("write {}: {e}", ext.display()))?;
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "7",
            "-subj",
            "/CN=loadcell test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "7",
            "-extfile",
            "server.ext",
        ],
    ];
    for (i, args) in steps.iter().enumerate() {
        let mut cmd = Command::new(&openssl);
        cmd.args(*args).current_dir(dir);
        run_cmd(cmd, &dir.join(format!("openssl-{i}.log")), "openssl")?;
    }
    for f in ["ca.pem", "server.pem", "server.key"] {
        let p = dir.join(f);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644))
            .map_err(|e| format!("chmod {}: {e}", p.display()))?;
    }
    Ok(())
}
