//! TLS settings shared by the network SQL drivers, from URL parameters:
//! `sslmode=disable|prefer|require|verify-ca|verify-full` and
//! `sslrootcert=PATH` (PEM).
//!
//! [`client_config`] turns them into a rustls [`ClientConfig`] that does the
//! verification the mode asks for (libpq's meanings), so a driver only has
//! to decide whether to ask the server for TLS at all:
//!
//! | mode | encrypts | verifies the chain | verifies the host name |
//! | --- | --- | --- | --- |
//! | `disable` | no | - | - |
//! | `prefer` | if the server can | no | no |
//! | `require` | yes | only if `sslrootcert` is given (as libpq) | no |
//! | `verify-ca` | yes | yes | no |
//! | `verify-full` | yes | yes | yes |
//!
//! Without `sslrootcert` the chain is checked against the Mozilla roots
//! (webpki-roots).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::target_url::Query;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn parse(s: &str) -> Result<SslMode, String> {
        Ok(match s {
            "disable" | "disabled" => SslMode::Disable,
            "prefer" | "preferred" => SslMode::Prefer,
            "require" | "required" => SslMode::Require,
            "verify-ca" | "verify_ca" => SslMode::VerifyCa,
            "verify-full" | "verify_identity" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                "unknown sslmode '{other}': use disable, prefer, require, verify-ca or verify-full"
            ))
            }
        })
    }

    /// The libpq spelling, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// A target's `sslmode` (if given) and `sslrootcert`, taken from its
/// parameters.
pub(crate) fn take_params(query: &mut Query) -> Result<(Option<SslMode>, Option<PathBuf>), String> {
    let sslmode = query.take_parsed("sslmode", SslMode::parse)?;
    Ok((sslmode, take_root_cert(query)?))
}

/// A target's `sslrootcert`: the path of a PEM file, not empty.
pub(crate) fn take_root_cert(query: &mut Query) -> Result<Option<PathBuf>, String> {
    let path = query.take_nonempty("sslrootcert", "a path to a PEM file")?;
    Ok(path.map(PathBuf::from))
}

/// How a server certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    /// Any certificate (the handshake signatures are still checked).
    Nothing,
    /// The chain up to a trusted root, whatever name the certificate is for.
    Chain,
    /// The chain and the host name.
    Full,
}

fn verification(mode: SslMode, root_cert: Option<&Path>) -> Result<Option<Verify>, String> {
    Ok(match (mode, root_cert) {
        (SslMode::Disable | SslMode::Prefer, Some(_)) => {
            return Err(format!(
                "sslrootcert has no effect with sslmode={}: use sslmode=verify-ca or verify-full",
                mode.as_str()
            ))
        }
        (SslMode::Disable, None) => None,
        (SslMode::Prefer, None) | (SslMode::Require, None) => Some(Verify::Nothing),
        // libpq: "require" with a root certificate behaves as "verify-ca".
        (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => Some(Verify::Chain),
        (SslMode::VerifyFull, _) => Some(Verify::Full),
    })
}

/// The rustls configuration for `mode`, or `None` for `disable`.
/// `root_cert` is a PEM file of trusted CA certificates; without it the
/// webpki (Mozilla) roots are trusted. Files are read here, so errors show
/// up before any connection is made.
pub fn client_config(
    mode: SslMode,
    root_cert: Option<&Path>,
) -> Result<Option<Arc<ClientConfig>>, String> {
    let Some(verify) = verification(mode, root_cert)? else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    let config = match verify {
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
        Verify::Chain | Verify::Full => {
            let roots = root_store(root_cert)?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| format!("TLS setup failed: {e}"))?;
            if verify == Verify::Full {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly { inner: webpki }))
                    .with_no_client_auth()
            }
        }
    };
    Ok(Some(Arc::new(config)))
}

/// The trust anchors: the certificates in `path`, or the webpki roots.
fn root_store(path: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let Some(path) = path else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read sslrootcert {shown}: {}", pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read sslrootcert {shown}: {}", pem_error(e)))?;
    if certs.is_empty() {
        return Err(format!(
            "sslrootcert {shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "sslrootcert {shown}: none of its {ignored} certificate(s) could be used as a CA"
        ));
    }
    Ok(roots)
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(io) => io.to_string(),
        other => format!("not a valid PEM file ({other:?})"),
    }
}

/// `sslmode=prefer|require`: encryption without authentication of the
/// server, as libpq does.
#[derive(Debug)]
struct AcceptAnyCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the webpki checks, except that a certificate issued
/// for another name is accepted. webpki checks the chain before the name,
/// so a name mismatch means the chain was good.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes_both_spellings() {
        assert_eq!(SslMode::parse("verify-full").unwrap(), SslMode::VerifyFull);
        assert_eq!(
            SslMode::parse("verify_identity").unwrap(),
            SslMode::VerifyFull
        );
        assert_eq!(SslMode::parse("required").unwrap(), SslMode::Require);
        let err = SslMode::parse("allow").unwrap_err();
        assert!(
            err.contains("'allow'") && err.contains("verify-full"),
            "{err}"
        );
        for m in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            assert_eq!(SslMode::parse(m).unwrap().as_str(), m);
        }
    }

    #[test]
    fn verification_per_mode() {
        let p = Path::new("/x.pem");
        assert_eq!(verification(SslMode::Disable, None), Ok(None));
        assert_eq!(
            verification(SslMode::Prefer, None),
            Ok(Some(Verify::Nothing))
        );
        assert_eq!(
            verification(SslMode::Require, None),
            Ok(Some(Verify::Nothing))
        );
        assert_eq!(
            verification(SslMode::Require, Some(p)),
            Ok(Some(Verify::Chain))
        );
        assert_eq!(
            verification(SslMode::VerifyCa, None),
            Ok(Some(Verify::Chain))
        );
        assert_eq!(
            verification(SslMode::VerifyFull, Some(p)),
            Ok(Some(Verify::Full))
        );
        let err = verification(SslMode::Disable, Some(p)).unwrap_err();
        assert!(err.contains("sslmode=disable"), "{err}");
    }

    #[test]
    fn builds_configs() {
        assert!(client_config(SslMode::Disable, None).unwrap().is_none());
        for mode in [
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            assert!(client_config(mode, None).unwrap().is_some(), "{mode:?}");
        }
    }

    #[test]
    fn root_cert_file_errors_name_the_file() {
        let missing = Path::new("/nonexistent/loadcell-ca.pem");
        let err = client_config(SslMode::VerifyFull, Some(missing)).unwrap_err();
        assert!(err.contains("/nonexistent/loadcell-ca.pem"), "{err}");

        let dir = std::env::temp_dir().join(format!("loadcell-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = client_config(SslMode::VerifyCa, Some(&empty)).unwrap_err();
        assert!(err.contains("no PEM certificate"), "{err}");

        let good = dir.join("ca.pem");
        std::fs::write(&good, TEST_CA).unwrap();
        assert!(client_config(SslMode::VerifyCa, Some(&good))
            .unwrap()
            .is_some());
        assert!(client_config(SslMode::Require, Some(&good))
            .unwrap()
            .is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A self-signed CA certificate (CN=loadcell test CA), for parsing only.
    const TEST_CA: &str = "\
-----BEGIN CERTIFICATE-----
MIIBnjCCAUOgAwIBAgIUX2o2sAybYE9DCQbSIUYcYXleeTswCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQbG9hZGNlbGwgdGVzdCBDQTAgFw0yNjExMjEwOTUxMThaGA8y
MTI2MTAyODA5NTExOFowGzEZMBcGA1UEAwwQbG9hZGNlbGwgdGVzdCBDQTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABMiQpKcFMms5HVNFoXprhpYmuASlA8ELjfra
dypHQMqx0OhgpgMhvqyWDGNjkLIYvF1cpGRADCNDWL0Cno4TqIqjYzBhMB0GA1Ud
DgQWBBQO2vPRnLzwuYT2EkDkfHkdkxfntDAfBgNVHSMEGDAWgBQO2vPRnLzwuYT2
EkDkfHkdkxfntDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwICBDAKBggq
hkjOPQQDAgNJADBGAiEA6speuVAsXJU+U0ffM98kqVssBayZdlrnJflJ8nFez74C
IQC8Cq5hyklGiqHqnxkTLHwkCNfUp7Hujoij28LAnXg1Uw==
-----END CERTIFICATE-----
";
}
