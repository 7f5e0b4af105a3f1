//! The client's one error type: a Tidal status code plus the server's message.

use tidal_common::StatusCode;

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    pub code: StatusCode,
    pub message: String,
}

impl ClientError {
    pub fn new(code: StatusCode, message: impl Into<String>) -> ClientError {
        ClientError {
            code,
            message: message.into(),
        }
    }
}

impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> ClientError {
        let untagged = s.metadata().get(tidal_proto::STATUS_CODE_KEY).is_none();
        // A plaintext client talking to a TLS server (or the reverse) sees the handshake bytes
        // as a broken HTTP/2 stream; say what is likely wrong.
        if untagged && s.message().contains("h2 protocol error") {
            return ClientError {
                code: StatusCode::Unavailable,
                message: format!(
                    "server unavailable: {} (is the server using TLS? connect with its CA, --tls-ca)",
                    s.message()
                ),
            };
        }
        let code = tidal_proto::code_of(&s);
        let message = if s.message().is_empty() {
            format!("{:?}", s.code())
        } else if code == StatusCode::Unavailable
            && s.metadata().get(tidal_proto::STATUS_CODE_KEY).is_none()
        {
            format!("server unavailable: {}", s.message())
        } else {
            s.message().to_string()
        };
        ClientError { code, message }
    }
}
