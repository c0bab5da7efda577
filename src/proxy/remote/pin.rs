//! The remote server's public key, as the TLS handshake showed it: part of its identity.
//!
//! The key is written as HPKP and `curl --pinnedpubkey` write it, `sha256//BASE64` of the
//! certificate's SubjectPublicKeyInfo, so that a person can compare it with what `openssl`
//! prints. A certificate renewed with the same key keeps it; a server that answers with
//! another key is another server.

use base64::Engine;

/// The key of the certificate `resp` came over, when it came over TLS and the certificate
/// parses; `None` for plain http.
pub(super) fn key_of(resp: &reqwest::Response) -> Option<String> {
    let der = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()?
        .peer_certificate()?;
    key_of_certificate(der)
}

/// The `sha256//BASE64` of the SubjectPublicKeyInfo of the DER certificate `der`.
fn key_of_certificate(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let spki = cert.tbs_certificate.subject_pki.raw;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    Some(format!(
        "sha256//{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::PublicKeyData;

    #[test]
    fn a_key_is_the_digest_of_the_certificates_public_key_and_garbage_is_none() {
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut certs = Vec::new();
        for name in ["a.test", "b.test"] {
            let params = rcgen::CertificateParams::new(vec![name.to_owned()])
                .unwrap_or_else(|e| panic!("{e}"));
            let cert = params.self_signed(&key).unwrap_or_else(|e| panic!("{e}"));
            certs.push(cert.der().to_vec());
        }
        let want = format!(
            "sha256//{}",
            base64::engine::general_purpose::STANDARD.encode(
                ring::digest::digest(&ring::digest::SHA256, &key.subject_public_key_info())
                    .as_ref()
            )
        );
        // Two certificates of one key: one key.
        assert_eq!(
            key_of_certificate(&certs[0]).as_deref(),
            Some(want.as_str())
        );
        assert_eq!(
            key_of_certificate(&certs[1]).as_deref(),
            Some(want.as_str())
        );
        let other = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let cert = rcgen::CertificateParams::new(vec!["a.test".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"))
            .self_signed(&other)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(key_of_certificate(cert.der()), Some(want));
        assert_eq!(key_of_certificate(b"not a certificate"), None);
        assert_eq!(key_of_certificate(&certs[0][..40]), None);
    }
}
