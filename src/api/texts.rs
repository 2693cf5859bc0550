//! The exact texts of the API's answers (a DRF service with
//! `LANGUAGE_CODE='ru'`, see spec/drf-conventions.md). Validation texts live
//! with validation in the engine; these are the transport-level ones.

/// No `Authorization` header, or not a Bearer one (DRF's NotAuthenticated).
pub const NOT_AUTHENTICATED: &str = "Учетные данные не были предоставлены.";
/// A Bearer token of the wrong format, unknown or revoked.
pub const INVALID_KEY: &str = "Недействительный API-ключ.";
/// Authenticated by a dashboard session, not by a key (403).
pub const KEY_REQUIRED: &str = "Требуется API-ключ.";
pub const NOT_FOUND: &str = "Страница не найдена.";
pub const SERVER_ERROR: &str = "Произошла ошибка сервера.";
/// The 503 body's human-readable `message` (not to be parsed by clients).
pub const NO_NUMBER_MESSAGE: &str =
    "Сейчас нет свободного номера для звонка в этом направлении. Повторите запрос позже.";
/// The stable 503 `error` code.
pub const NO_NUMBER_CODE: &str = "no_dial_number_available";
/// The 503 `retry_after` and `Retry-After`, in seconds.
pub const NO_NUMBER_RETRY_AFTER_SECONDS: u64 = 60;
/// The reason recorded on the dashboard's failed row for a 503.
pub const NO_NUMBER_REASON: &str = "all lines busy";

pub fn method_not_allowed(method: &str) -> String {
    format!("Метод \"{method}\" не разрешен.")
}
