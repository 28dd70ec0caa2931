//! Standard Webhooks signatures: HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`
//! with the secret `whsec_<base64 key>`, sent as `v1,<base64>` (several, space-separated,
//! while a secret rotates), within five minutes of the receiver's clock.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// How far a timestamp may be from now, either way.
pub const TOLERANCE_SECS: i64 = 5 * 60;

/// A webhook secret, decoded.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Why a delivery's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("missing header {0}")]
    Missing(&'static str),
    #[error("webhook-timestamp is not a number of seconds")]
    BadTimestamp,
    #[error("webhook-timestamp is {0} s away from this machine's clock (at most 300 s either way)")]
    Stale(i64),
    #[error("no v1 signature matches the body")]
    NoMatch,
}

impl Secret {
    /// `whsec_<base64>`; the prefix is optional, as some senders leave it out.
    pub fn parse(text: &str) -> Result<Self, String> {
        let key = text.trim().strip_prefix("whsec_").unwrap_or(text.trim());
        match STANDARD.decode(key) {
            Ok(bytes) if !bytes.is_empty() => Ok(Self(bytes)),
            _ => Err("is not a webhook secret: expected whsec_ followed by base64".to_owned()),
        }
    }

    fn mac(&self, id: &str, timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The `webhook-signature` value for a delivery.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let digest = self
            .mac(id, &timestamp.to_string(), body)
            .finalize()
            .into_bytes();
        format!("v1,{}", STANDARD.encode(digest))
    }

    /// Checks a delivery's headers against its raw body, `now` in Unix seconds: the
    /// timestamp within the tolerance and one `v1` signature matching (compared in constant
    /// time).
    pub fn verify(
        &self,
        id: Option<&str>,
        timestamp: Option<&str>,
        signatures: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), Refused> {
        let id = id.ok_or(Refused::Missing("webhook-id"))?;
        let timestamp = timestamp.ok_or(Refused::Missing("webhook-timestamp"))?;
        let signatures = signatures.ok_or(Refused::Missing("webhook-signature"))?;
        let at: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| Refused::BadTimestamp)?;
        let off = now.saturating_sub(at);
        if off.abs() > TOLERANCE_SECS {
            return Err(Refused::Stale(off));
        }
        let mac = self.mac(id, timestamp.trim(), body);
        let matches = signatures
            .split_whitespace()
            .filter_map(|one| one.strip_prefix("v1,"))
            .filter_map(|b64| STANDARD.decode(b64).ok())
            .any(|sig| mac.clone().verify_slice(&sig).is_ok());
        if matches {
            Ok(())
        } else {
            Err(Refused::NoMatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The Standard Webhooks specification's own example.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_specification_vector_signs_and_verifies() {
        let secret = Secret::parse(SECRET).unwrap();
        assert_eq!(secret.sign(ID, TS, BODY), SIGNATURE);
        let ts = TS.to_string();
        assert_eq!(
            secret.verify(Some(ID), Some(&ts), Some(SIGNATURE), BODY, TS + 10),
            Ok(())
        );
    }

    #[test]
    fn any_of_several_signatures_may_match() {
        let secret = Secret::parse(SECRET).unwrap();
        let ts = TS.to_string();
        let rotating = format!("v1,bm9wZQ== v2,whatever {SIGNATURE}");
        assert_eq!(
            secret.verify(Some(ID), Some(&ts), Some(&rotating), BODY, TS),
            Ok(())
        );
    }

    #[test]
    fn a_changed_body_id_or_secret_fails() {
        let secret = Secret::parse(SECRET).unwrap();
        let ts = TS.to_string();
        let verify = |secret: &Secret, id, body: &[u8]| {
            secret.verify(Some(id), Some(&ts), Some(SIGNATURE), body, TS)
        };
        assert_eq!(
            verify(&secret, ID, br#"{"test": 2432232315}"#),
            Err(Refused::NoMatch)
        );
        assert_eq!(verify(&secret, "msg_other", BODY), Err(Refused::NoMatch));
        let other = Secret::parse("whsec_c2VjcmV0").unwrap();
        assert_eq!(verify(&other, ID, BODY), Err(Refused::NoMatch));
    }

    #[test]
    fn stale_and_future_timestamps_are_refused() {
        let secret = Secret::parse(SECRET).unwrap();
        let ts = TS.to_string();
        let at = |now| secret.verify(Some(ID), Some(&ts), Some(SIGNATURE), BODY, now);
        assert_eq!(at(TS + 301), Err(Refused::Stale(301)));
        assert_eq!(at(TS - 301), Err(Refused::Stale(-301)));
        assert_eq!(at(TS + 300), Ok(()));
        let bad = secret.verify(Some(ID), Some("soon"), Some(SIGNATURE), BODY, TS);
        assert_eq!(bad, Err(Refused::BadTimestamp));
        let none = secret.verify(None, Some(&ts), Some(SIGNATURE), BODY, TS);
        assert_eq!(none, Err(Refused::Missing("webhook-id")));
    }

    #[test]
    fn a_secret_must_be_base64() {
        assert!(Secret::parse("whsec_!!!").is_err());
        assert!(Secret::parse("").is_err());
        assert!(format!("{:?}", Secret::parse(SECRET).unwrap()) == "Secret(…)");
    }
}
